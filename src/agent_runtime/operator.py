"""The operator's commands: see every run, its journal, and what a crash left in doubt.

::

    python -m agent_runtime runs [--status S ...] [--in-doubt] [--limit N] [--json]
    python -m agent_runtime show RUN [--json] [--svg FILE]
    python -m agent_runtime resolve RUN [--takeover] [--json]
    python -m agent_runtime cancel RUN [--reason TEXT] [--json]

``runs`` and ``show`` only read, and never create the schema (a database without
it is an error, not something to fix behind the operator's back). ``resolve``
re-sends every intent without a confirm under its original key through
:meth:`Worker.resolve` (claim, re-send, record, release) and takes no further
step; a run whose lease is live is refused unless its owner provably died on
this host or ``--takeover`` fences it out. ``cancel`` is the one write that needs
no lease: the run becomes ``cancelled`` and its worker, if any, stops at its next
journal write, since every one requires ``status = 'running'``.

Errors are the runtime's own (one line from ``cli.main``, non-zero exit):
``RunNotFound`` (2) for an unknown run, ``DatabaseError`` (4) for an unreachable
database or one without the schema, ``RunUnavailable`` (5) when a live worker or
a final status stands in the way.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from datetime import datetime

from . import config, db
from .crash import NO_CRASH
from .dbsource import database_url
from .errors import ConfigError, RunUnavailable
from .history import read_history
from .operator_text import format_cancellation, format_history, format_resolution, format_runs
from .runview import Cancellation, Resolution, RunList, RunSummary, clock_text
from .worker import Worker

log = logging.getLogger(__name__)

STATUSES = ("pending", "running", "done", "failed", "cancelled")
DEFAULT_LIMIT = 100  # runs listed by `runs` unless --limit says otherwise
APPLICATION = "agent_runtime.operator"  # application_name of the operator's connections


# -- reading -------------------------------------------------------------------------------


def _iso(at: datetime | None) -> str | None:
    return at.isoformat() if at is not None else None


def list_runs(
    conn: db.Connection,
    *,
    statuses: list[str] | None = None,
    in_doubt: bool = False,
    limit: int | None = DEFAULT_LIMIT,
) -> RunList:
    """Runs matching the filters, most recently active first."""
    rows = db.run(
        conn,
        "operator_list_runs",
        {"statuses": statuses or None, "in_doubt": in_doubt, "limit": limit},
    )
    runs = [RunSummary.from_row(r) for r in rows]
    return RunList(
        runs=runs,
        total=int(rows[0]["total"]) if rows else 0,
        now=runs[0].now if runs else None,
    )


# -- writing -------------------------------------------------------------------------------


def cancel_run(conn: db.Connection, run_id: str, reason: str | None = None) -> Cancellation:
    """Stop a pending or running run for good; cancelling it twice changes nothing."""
    text = "cancelled by operator" + (f": {reason}" if reason else "")
    row = db.one(conn, "operator_cancel_run", {"run": run_id, "reason": text})
    history = read_history(conn, run_id)  # RunNotFound when there is no such run
    run = history.run
    doubtful = [str(s.key) for s in history.steps if s.state == "in_doubt"]
    if row is None:
        if run.status != "cancelled":
            raise RunUnavailable(
                f"run {run_id} is {run.status}; only a pending or running run can be cancelled"
            )
        return Cancellation(
            run_id=run_id,
            previous_status="cancelled",
            previous_owner=None,
            generation=run.generation,
            cancelled_at=run.updated_at,
            already=True,
            left_in_doubt=doubtful,
        )
    log.info(
        "cancelled run=%s previous_status=%s previous_owner=%s generation=%d",
        run_id,
        row["previous_status"],
        row["previous_owner"],
        row["generation"],
    )
    return Cancellation(
        run_id=run_id,
        previous_status=row["previous_status"],
        previous_owner=row["previous_owner"],
        generation=row["generation"],
        cancelled_at=row["cancelled_at"],
        already=False,
        left_in_doubt=doubtful,
    )


def resolve_run(
    settings: config.Settings, url: str, run_id: str, *, takeover: bool = False
) -> Resolution:
    """Re-send the run's stranded intents under their keys now; take no further step."""
    with db.connection(url, application_name=APPLICATION) as conn:
        db.require_schema(conn)
        before = read_history(conn, run_id)
        stranded = [s.seq for s in before.steps if s.state == "in_doubt"]
        if not stranded:
            return Resolution(run_id=run_id, resolved=[], in_doubt=[])
        run = before.run
        if run.status in ("failed", "cancelled"):
            raise RunUnavailable(
                f"run {run_id} is {run.status} ({run.failure or 'no reason recorded'}); "
                f"its {len(stranded)} intent(s) stay in doubt: only a pending or running "
                "run can be claimed to re-send them"
            )
        if run.lease_live and not before.owner_gone and not takeover:
            assert run.lease_expires_at is not None
            raise RunUnavailable(
                f"run {run_id} is held by {run.owner} (generation {run.generation}, lease "
                f"until {clock_text(run.lease_expires_at, run.now)}), a worker that is alive as "
                "far as this host can tell; it re-sends its own intents. To fence it out and "
                f"resolve now anyway: resolve {run_id} --takeover"
            )
        worker = Worker.open(settings.with_changes(crash=NO_CRASH), url, heartbeat=False)
        try:
            worker.resolve(run_id, takeover=takeover)
        finally:
            worker.close()
        after = read_history(conn, run_id)
    resolved = [s for s in after.steps if s.seq in stranded]
    return Resolution(run_id=run_id, resolved=resolved, in_doubt=after.in_doubt)


# -- the commands --------------------------------------------------------------------------


def _emit(text: str) -> None:
    """Print to stdout; a reader that stopped early (``| head``) is not an error."""
    try:
        print(text, flush=True)
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # so the interpreter's final flush is quiet
        os.close(devnull)


def _print_json(data: object) -> None:
    _emit(json.dumps(data, indent=2, default=str))


def _reading(settings: config.Settings) -> db.Connection:
    conn = db.connect(database_url(settings), application_name=APPLICATION)
    try:
        db.require_schema(conn)
    except BaseException:
        conn.close()
        raise
    return conn


def cmd_runs(args: argparse.Namespace) -> int:
    statuses = sorted({s for group in args.status or [] for s in group})
    limit = None if args.limit == 0 else args.limit
    conn = _reading(config.from_env())
    try:
        listing = list_runs(conn, statuses=statuses, in_doubt=args.in_doubt, limit=limit)
    finally:
        conn.close()
    if args.json:
        _print_json(
            {
                "now": _iso(listing.now),
                "total": listing.total,
                "runs": [r.to_json() for r in listing.runs],
            }
        )
    else:
        _emit(format_runs(listing, filtered=bool(statuses) or args.in_doubt))
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    conn = _reading(config.from_env())
    try:
        history = read_history(conn, args.run_id)
    finally:
        conn.close()
    if args.svg:
        from .timeline_svg import write

        try:
            path = write(history, args.svg)
        except OSError as exc:
            raise ConfigError(
                f"cannot write the timeline to {args.svg}: {exc.strerror or exc}"
            ) from exc
        log.info(
            "timeline-written run=%s path=%s events=%d", args.run_id, path, len(history.events)
        )
    if args.json:
        _print_json(history.to_json())
    else:
        _emit(format_history(history))
    return 0


def cmd_resolve(args: argparse.Namespace) -> int:
    settings = config.from_env()
    resolution = resolve_run(settings, database_url(settings), args.run_id, takeover=args.takeover)
    if args.json:
        _print_json(resolution.to_json())
    else:
        _emit(format_resolution(resolution))
    return 0


def cmd_cancel(args: argparse.Namespace) -> int:
    conn = _reading(config.from_env())
    try:
        cancellation = cancel_run(conn, args.run_id, args.reason)
    finally:
        conn.close()
    if args.json:
        _print_json(cancellation.to_json())
    else:
        _emit(format_cancellation(cancellation))
    return 0


def _statuses(text: str) -> list[str]:
    chosen = [s.strip() for s in text.split(",") if s.strip()]
    unknown = [s for s in chosen if s not in STATUSES]
    if unknown or not chosen:
        raise argparse.ArgumentTypeError(
            f"unknown status {', '.join(unknown) or repr(text)}; one of {', '.join(STATUSES)}"
        )
    return chosen


def _limit(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 (all) or more, got {value}")
    return value


def register_operator_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``runs``, ``show``, ``resolve`` and ``cancel`` to the CLI's subcommands."""
    runs = sub.add_parser("runs", help="list runs: status, owner and lease, steps, doubt")
    runs.add_argument(
        "--status",
        type=_statuses,
        action="append",
        metavar="STATUS",
        help=f"only runs in this status (repeat, or comma-separate): {', '.join(STATUSES)}",
    )
    runs.add_argument(
        "--in-doubt", action="store_true", help="only runs with an intent and no confirm"
    )
    runs.add_argument(
        "--limit",
        type=_limit,
        default=DEFAULT_LIMIT,
        help=f"at most this many, most recent first (default {DEFAULT_LIMIT}; 0: all)",
    )
    runs.add_argument("--json", action="store_true", help="print JSON instead of a table")
    runs.set_defaults(func=cmd_runs)

    show = sub.add_parser(
        "show", help="one run step by step: decisions, intents, confirms, takeovers, doubt"
    )
    show.add_argument("run_id", metavar="RUN")
    show.add_argument("--json", action="store_true", help="print the same as JSON")
    show.add_argument("--svg", metavar="FILE", help="also draw the timeline as an SVG file")
    show.set_defaults(func=cmd_show)

    resolve = sub.add_parser(
        "resolve",
        help="re-send a run's intents that have no confirm, under the same keys; no new step",
    )
    resolve.add_argument("run_id", metavar="RUN")
    resolve.add_argument(
        "--takeover",
        action="store_true",
        help="take the run even from a worker whose lease is live (it is fenced out)",
    )
    resolve.add_argument("--json", action="store_true", help="print the outcome as JSON")
    resolve.set_defaults(func=cmd_resolve)

    cancel = sub.add_parser(
        "cancel", help="stop a pending or running run for good; its worker stops at its next write"
    )
    cancel.add_argument("run_id", metavar="RUN")
    cancel.add_argument("--reason", help="recorded in the run's failure column")
    cancel.add_argument("--json", action="store_true", help="print the outcome as JSON")
    cancel.set_defaults(func=cmd_cancel)
