"""``python -m mock_remotes``: the mocks in the foreground until a stop signal.

The cloud and the model always run; the support desk too when ``--support-port``
is given. Ctrl-C (SIGINT), SIGTERM and SIGHUP all stop every uvicorn child the same way
(``MockServers.stop``: SIGTERM to each, SIGKILL after 5 s) before the command
exits. A signal handler only records the signal; the foreground loop does the
stopping, so a signal can never land between a ``Popen`` and the bookkeeping
that would stop that child.
"""

from __future__ import annotations

import argparse
import logging
import signal
import time
from importlib import metadata
from types import FrameType

from mock_remotes._home import default_data_dir
from mock_remotes.serve import MockStartError, start_mocks

logger = logging.getLogger(__name__)

CLI_DESCRIPTION = """\
Run the mock cloud and the mock model in the foreground, each as its own uvicorn
server on 127.0.0.1, until Ctrl-C, SIGTERM or SIGHUP stops them (SIGTERM to each,
SIGKILL after 5 s). The cloud keeps its resources and idempotency keys in
DATA_DIR/mock-cloud.sqlite3 and the model its call counts in mock-model.json, so
a restart on the same directory forgets nothing; their logs are mock-cloud.log
and mock-model.log there. Point the agent at them with CLOUD_URL and MODEL_URL
(the defaults match the default ports). With --support-port, the mock support
desk (orders, tickets, a mailbox) runs too, its state in mock-support.sqlite3."""

CLI_EPILOG = """\
Example:
  python -m mock_remotes --cloud-port 8001 --model-port 8002
  CLOUD_URL=http://127.0.0.1:8001 MODEL_URL=http://127.0.0.1:8002 python -m agent_runtime
  python -m mock_remotes /tmp/mocks --support-port 8003   # own DATA_DIR, with the support desk

Exit status: 0 after a stop signal, 1 if a mock exited by itself, 2 on bad usage."""

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
WATCH = 0.2  # seconds between checks that both mocks still run


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m mock_remotes",
        description=CLI_DESCRIPTION,
        epilog=CLI_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    parser.add_argument(
        "data_dir",
        nargs="?",
        default=str(default_data_dir()),
        metavar="DATA_DIR",
        help="where both mocks keep their state and logs, created if missing "
        "(default: mocks/ in $CRASHRESUME_HOME, else in the platform's data directory: "
        "%(default)s)",
    )
    parser.add_argument(
        "--cloud-port",
        type=int,
        default=8001,
        metavar="PORT",
        help="port of the mock cloud (default: %(default)s; 0 picks a free one)",
    )
    parser.add_argument(
        "--model-port",
        type=int,
        default=8002,
        metavar="PORT",
        help="port of the mock model (default: %(default)s; 0 picks a free one)",
    )
    parser.add_argument(
        "--cloud-latency",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="delay before the cloud acts on every create request (default: %(default)s)",
    )
    parser.add_argument(
        "--model-latency",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="delay before the model answers every decision (default: %(default)s)",
    )
    parser.add_argument(
        "--support-port",
        type=int,
        default=None,
        metavar="PORT",
        help="also run the mock support desk on this port (0 picks a free one; "
        "default: not started)",
    )
    parser.add_argument(
        "--support-latency",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="delay before the support desk files a ticket or sends an email "
        "(default: %(default)s)",
    )
    return parser


def _version() -> str:
    try:
        return metadata.version("crashresume")
    except metadata.PackageNotFoundError:  # a source tree on sys.path, not installed
        return "unknown"


def main(argv: list[str] | None = None) -> int:
    """Run both mocks in the foreground until a stop signal; stop both before returning."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.support_latency and args.support_port is None:
        parser.error("--support-latency needs --support-port: the support desk is not started")
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)
    stop_by: list[int] = []  # the handler only appends: safe whatever the main thread does

    def request_stop(signum: int, frame: FrameType | None) -> None:
        stop_by.append(signum)

    previous = {sig: signal.signal(sig, request_stop) for sig in STOP_SIGNALS}
    try:
        with start_mocks(
            args.data_dir,
            cloud_port=args.cloud_port or None,
            model_port=args.model_port or None,
            cloud_latency=args.cloud_latency,
            model_latency=args.model_latency,
            log_level="info",
            support=args.support_port is not None,
            support_port=args.support_port or None,
            support_latency=args.support_latency,
        ) as mocks:
            lines = [f"cloud {mocks.cloud_url}", f"model {mocks.model_url}"]
            if mocks.support is not None:
                lines.append(f"support {mocks.support_url}")
            print("\n".join([*lines, "(Ctrl-C or SIGTERM stops them)"]), flush=True)
            while not stop_by:
                exited = [m for m in mocks.running if m.process.poll() is not None]
                if exited:
                    for mock in exited:
                        logger.error(
                            "mock %s exited by itself code=%s log=%s",
                            mock.name,
                            mock.process.returncode,
                            mock.log_path,
                        )
                    return 1
                time.sleep(WATCH)
            logger.info("mocks stopping signal=%s", signal.Signals(stop_by[0]).name)
    except MockStartError as exc:
        logger.error("mocks did not start: %s", exc)
        return 1
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return 0
