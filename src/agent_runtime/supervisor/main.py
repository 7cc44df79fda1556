"""``python -m agent_runtime.supervisor``: restarts runs whose worker died.

Every ``poll`` seconds (and at once whenever one of its workers is done with a run or
exits) it gives up on runs that failed too often for too long (``max_attempts`` claims
*and* ``give_up_after`` seconds without progress), then claims up to ``max_workers`` runs
that are free past their backoff or whose lease ran out (``FOR UPDATE SKIP LOCKED``:
several supervisors may share a database without claiming one run twice) and hands each
to a worker process: by default an idle one of its pool of long-lived workers, else a new
one (:mod:`agent_runtime.supervisor.workerpool`; ``--spawn fork`` or ``exec``: a fresh process per
run). A run with a live lease is never touched, nor one that waits out a backoff. Nothing
restarts the supervisor itself; that is the job of whatever keeps processes alive on the
machine.

Every run a worker is done with is one line, ``worker-exited run=... code=... pid=...``,
with the exit code the run would have had in a process of its own. When a run ends
without finishing, it frees the run if the worker died holding it (at once after a first
death, with a backoff after deaths in a row; with the exit code as the reason when the
worker recorded none), and logs every backoff: ``backoff run=... attempt=... until=...``.
A pool worker that dies is replaced at once, and beside the busy workers one open
spare waits (room allowing), so the run of a worker that dies is adopted at once. A
worker that raises an exception the runtime
did not expect logs its traceback, records the reason on the run, and ends it with 70.
A worker alive but useless is killed (``SIGKILL``) and its run handed on like a death's:
one that holds a run past its lease, ``worker-hung run=... pid=... lease_expired_ago=...s
action=killed``, or one still beating whose run made no progress for ``--stuck-after``
seconds, ``worker-stuck run=... pid=... no_progress_for=...s stuck_after=...s
action=killed`` (:mod:`agent_runtime.supervisor.takeback`). A claimable run of an agent it does not
have is named once, ``unserved run=... agent=...`` (:mod:`agent_runtime.supervisor.unserved`).
With ``--prune-after DURATION`` it removes final runs that old, at most once a minute
(:mod:`agent_runtime.store.prune`): ``pruned status=done runs=500 older_than=...s``.

The :class:`Supervisor` itself is in :mod:`agent_runtime.supervisor.supervision`; this module is
the command.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence

from agent_runtime import config, logfmt
from agent_runtime._version import version
from agent_runtime.duration import parse_duration
from agent_runtime.errors import AgentRuntimeError
from agent_runtime.localpg.dbsource import database_url
from agent_runtime.observe import metrics
from agent_runtime.supervisor.supervision import Supervisor
from agent_runtime.supervisor.workerpool import SPAWN_MODES
from agent_runtime.tools.agent import DEFAULT_AGENT, agents_of

__all__ = ["Supervisor", "build_parser", "main"]

log = logging.getLogger(__name__)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m agent_runtime.supervisor",
        description="Restart agent runs whose worker died (lease expired or process gone).",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {version()}")
    parser.add_argument("--lease", type=float, help=f"seconds (default {config.LEASE})")
    parser.add_argument("--poll", type=float, help=f"seconds (default {config.POLL})")
    parser.add_argument("--heartbeat", type=float, help=f"seconds (default {config.HEARTBEAT})")
    parser.add_argument(
        "--max-workers", type=int, help=f"workers at once (default {config.MAX_WORKERS})"
    )
    parser.add_argument(
        "--max-attempts",
        type=int,
        help="claims without progress before a run may be failed, with --give-up-after "
        f"(default {config.MAX_ATTEMPTS}; env MAX_ATTEMPTS)",
    )
    parser.add_argument(
        "--give-up-after",
        type=float,
        help="seconds without progress before a run may be failed, with --max-attempts "
        f"(default {config.GIVE_UP_AFTER:g}; env GIVE_UP_AFTER)",
    )
    parser.add_argument(
        "--run-backoff",
        type=float,
        help="seconds a run stopped by a resumable error waits before its next claim, "
        f"doubled per attempt (default {config.RUN_BACKOFF:g}; env RUN_BACKOFF)",
    )
    parser.add_argument(
        "--run-backoff-cap",
        type=float,
        help=f"seconds that wait grows to at most (default {config.RUN_BACKOFF_CAP:g}; "
        "env RUN_BACKOFF_CAP)",
    )
    parser.add_argument(
        "--stuck-after",
        type=float,
        help="seconds a run may go without progress (a journal write) while its worker "
        "beats before the worker is killed and the run handed on; 0: never (default "
        f"{config.STUCK_AFTER:g}; env STUCK_AFTER)",
    )
    parser.add_argument(
        "--prune-after",
        metavar="DURATION",
        help="remove done, failed and cancelled runs (with all their journal) once their "
        "last change is this old, e.g. 30d; checked every minute, in short batches "
        "(default: never; env PRUNE_AFTER)",
    )
    parser.add_argument(
        "--spawn",
        choices=SPAWN_MODES,
        default="pool",
        help="pool: long-lived workers that take run after run (default); fork: a fresh "
        "fork per run; exec: a fresh interpreter per run",
    )
    parser.add_argument(
        "--agent",
        action="append",
        metavar="MODULE:ATTR",
        help="an agent whose runs this supervisor takes, as package.module:attribute (give "
        f"several to take several; default {DEFAULT_AGENT})",
    )
    parser.add_argument(
        "--metrics-port",
        metavar="PORT",
        help=f"serve Prometheus metrics on http://{metrics.HOST}:PORT/metrics (0: a free "
        "port, logged; default: none; env METRICS_PORT)",
    )
    parser.add_argument(
        "--once",
        action="store_true",
        help="exit once nothing is claimable and no worker is running (a run waiting out a "
        "backoff is not claimable)",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    logfmt.install()
    args = build_parser().parse_args(argv)
    try:
        settings = config.from_env(
            lease=args.lease,
            poll=args.poll,
            heartbeat=args.heartbeat,
            max_workers=args.max_workers,
            max_attempts=args.max_attempts,
            give_up_after=args.give_up_after,
            run_backoff=args.run_backoff,
            run_backoff_cap=args.run_backoff_cap,
            stuck_after=args.stuck_after,
            prune_after=None
            if args.prune_after is None
            else parse_duration(args.prune_after, option="--prune-after"),
        )
        port = _metrics_port(args.metrics_port)
        addresses = args.agent or [DEFAULT_AGENT]
        agents = agents_of(addresses)  # a wrong --agent is refused, named, before a claim
        supervisor = Supervisor(
            database_url(settings),
            settings,
            spawn=args.spawn,
            agents=agents,
            agent_addresses=addresses,
        )
        # Started before any worker is forked, so that every worker counts its events.
        endpoint = (
            None
            if port is None
            else metrics.Endpoint(supervisor.url, port, lambda: _pool_counts(supervisor))
        )
    except AgentRuntimeError as exc:
        log.error("%s error=%r", type(exc).__name__, str(exc))
        return exc.exit_code
    supervisor.install_signals()
    try:
        return supervisor.serve(once=args.once)
    finally:
        if endpoint is not None:
            endpoint.close()


def _metrics_port(flag: str | None) -> int | None:
    """The port of ``--metrics-port`` (else ``METRICS_PORT``), None when neither is set."""
    option, raw = ("--metrics-port", flag) if flag is not None else ("METRICS_PORT", None)
    if raw is None:
        raw = os.environ.get("METRICS_PORT") or None
    return None if raw is None else metrics.parse_port(raw, option=option)


def _pool_counts(supervisor: Supervisor) -> tuple[int, int]:
    """(worker processes, the busy ones) now: read in the metrics endpoint's thread, from
    a copy (a sweep may change the pool meanwhile)."""
    workers = list(supervisor.workers.values())
    return len(workers), sum(w.lease is not None for w in workers)


if __name__ == "__main__":
    sys.exit(main())
