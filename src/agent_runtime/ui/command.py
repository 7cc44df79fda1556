"""``python -m agent_runtime ui``: serve the dashboard.

::

    python -m agent_runtime ui [--port N] [--bind ADDRESS] [--token TOKEN]

It serves on 127.0.0.1 (port :data:`PORT` unless ``--port``; 0: any free port, printed).
Any bind address that is not loopback is refused (one line, exit 2) unless a token is set,
by ``--token`` or ``CRASHRESUME_UI_TOKEN`` (read here, the CLI's edge): then every page
and action needs it. The database is the CLI's (``DATABASE_URL``, else the local
cluster), read through the operator's functions only.
"""

from __future__ import annotations

import argparse
import ipaddress
import logging
import os

from agent_runtime import config
from agent_runtime.errors import ConfigError
from agent_runtime.localpg.dbsource import database_url

log = logging.getLogger(__name__)
PORT = 8765  # the dashboard's default port
BIND = "127.0.0.1"
TOKEN_ENV = "CRASHRESUME_UI_TOKEN"


def loopback(host: str) -> bool:
    """Whether ``host`` names this machine only (127.0.0.0/8, ::1, localhost)."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"a port number, got {text!r}") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"a port is 0 (any free one) to 65535, got {value}")
    return value


def cmd_ui(args: argparse.Namespace) -> int:
    token = args.token if args.token is not None else os.environ.get(TOKEN_ENV) or None
    if token is not None and len(token) < 16:
        raise ConfigError(
            f"the dashboard's token is {len(token)} characters; give one of at least 16 "
            '(e.g. python -c "import secrets; print(secrets.token_urlsafe())")'
        )
    if not loopback(args.bind) and token is None:
        raise ConfigError(
            f"--bind {args.bind} would let other machines act on runs: the dashboard binds "
            f"a non-loopback address only with a token (--token or {TOKEN_ENV})"
        )
    from .app import build_app, listen, serve  # FastAPI and uvicorn: only to serve
    from .guard import Guard

    settings = config.from_env()
    url = database_url(settings)
    sock = listen(args.bind, args.port)
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    app = build_app(settings, url, Guard(token=token))
    log.info("ui-serving url=http://%s:%d/ token=%s", shown, port, "yes" if token else "no")
    print(f"dashboard: http://{shown}:{port}/", flush=True)
    try:
        serve(app, sock)
    finally:
        sock.close()
    return 0


def register_ui_command(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``ui`` to the CLI's subcommands."""
    ui = sub.add_parser(
        "ui",
        help="serve the dashboard: runs, one run's journal and timeline, what needs a "
        "person, and the resolve, retry and cancel actions",
    )
    ui.add_argument(
        "--port", type=_port, default=PORT, help=f"the port (default {PORT}; 0: any free one)"
    )
    ui.add_argument(
        "--bind",
        default=BIND,
        metavar="ADDRESS",
        help=f"the address to listen on (default {BIND}; another than loopback needs a token)",
    )
    ui.add_argument(
        "--token",
        help=f"every page and action needs this token (default: ${TOKEN_ENV}); required to "
        "bind a non-loopback address",
    )
    ui.set_defaults(func=cmd_ui)
