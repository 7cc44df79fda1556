"""The operator's commands: see every run, its journal, and what a crash left in doubt.

The argparse side only: it parses, connects, calls the domain functions
(:mod:`.snapshot` reads, :mod:`.actions` writes) and prints their results
(:mod:`.text`, :mod:`.timeline`, or JSON)::

    python -m agent_runtime runs [--status S ...] [--in-doubt] [--agent NAME] [--limit N]
                            [--after CURSOR] [--json]
    python -m agent_runtime show RUN [--json] [--svg FILE]
    python -m agent_runtime resolve RUN [--takeover] [--json]
    python -m agent_runtime resolve RUN --seq N (--confirm JSON | --redo | --fail)
                                    [--reason TEXT] [--json]
    python -m agent_runtime cancel RUN [--reason TEXT] [--json]
    python -m agent_runtime retry RUN [--json]

No command creates the schema (a database without it is not something to fix behind
the operator's back): ``runs`` on a database without any says there are no runs yet
(exit 0); every other command refuses it (``DatabaseError``, exit 4).

Errors are the runtime's own (one line from ``cli.main``, non-zero exit):
``InvalidRunId`` (2) for an id no run can have (checked before anything is read or
written), ``RunNotFound`` (2) for an unknown run, ``DatabaseError`` (4) for an
unreachable database or one without the schema, ``RunUnavailable`` (5) when a live
worker or a final status stands in the way (``retry`` of a done or cancelled run; ``resolve
--seq`` of a run that does not need attention, or of a call already resolved).
``resolve RUN`` of a run that needs attention acts on nothing: it prints the call in doubt
and the three choices, and exits 2.
Everything printed as text has its control characters escaped
(:func:`agent_runtime.logfmt.escape`).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

from agent_runtime import config
from agent_runtime.localpg.dbsource import database_url
from agent_runtime.store import db
from agent_runtime.store.runid import check_run_id

from ..errors import EXIT_USAGE, ConfigError
from ..logfmt import escape
from .actions import cancel_run, parse_result, resolve_call, resolve_run, retry_run
from .attention import Choice
from .cursor import Cursor
from .snapshot import APPLICATION, DEFAULT_LIMIT, STATUSES, list_runs, read_history
from .text import (
    format_attention,
    format_call_resolution,
    format_cancellation,
    format_history,
    format_resolution,
    format_retry,
    format_runs,
)
from .views import RunList

log = logging.getLogger(__name__)
R = TypeVar("R", bound="_Result")


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


class _Result(Protocol):
    def to_json(self) -> dict[str, Any]: ...


def _print_result(result: R, text: Callable[[R], str], *, as_json: bool) -> None:
    """A command's outcome: its JSON, or its text."""
    if as_json:
        _print_json(result.to_json())
    else:
        _emit(text(result))


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
    after = Cursor.decode(args.after) if args.after is not None else None
    conn = db.connect(database_url(config.from_env()), application_name=APPLICATION)
    try:
        empty = db.schema_missing(conn)  # nothing ever ran here: no runs, not an error
        where = db.describe_conn(conn)
        if not empty:
            db.require_schema(conn)
        listing = (
            RunList(runs=[], next=None, now=None)
            if empty
            else list_runs(
                conn,
                statuses=statuses,
                in_doubt=args.in_doubt,
                limit=limit,
                after=after,
                agent=args.agent,
            )
        )
    finally:
        conn.close()
    if args.json:
        _print_json(listing.to_json())
    elif empty:
        _emit(
            f"no runs yet: the database {escape(where)} has no crashresume schema (nothing has "
            "run against it; the first worker or supervisor, or `python -m agent_runtime "
            "schema`, creates it)"
        )
    else:
        _emit(format_runs(listing, filtered=bool(statuses) or args.in_doubt or bool(args.agent)))
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    check_run_id(args.run_id, source="RUN")
    conn = _reading(config.from_env())
    try:
        history = read_history(conn, args.run_id)
    finally:
        conn.close()
    if args.svg:
        from .timeline import write

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


def _choice(args: argparse.Namespace) -> Choice | None:
    """The operator's choice for ``--seq``, once the options are checked together."""
    choice: Choice | None = (
        "confirm" if args.confirm is not None else "redo" if args.redo else "fail" if args.fail
        else None
    )  # fmt: skip
    if choice is None and args.seq is not None:
        raise ConfigError(
            f"--seq {args.seq} needs a choice: --confirm JSON (the call acted; JSON is its "
            "result), --redo (it did not: send it once more) or --fail [--reason TEXT]"
        )
    if choice is not None and args.seq is None:
        raise ConfigError(f"--{choice} needs --seq N: the call in doubt it resolves")
    if choice is not None and args.takeover:
        raise ConfigError(
            "--takeover is for re-sending the intents of a run a live worker holds; a call "
            "resolved with --seq belongs to a parked run, which nobody holds"
        )
    if args.reason is not None and choice is None:
        raise ConfigError("--reason goes with --seq N and --confirm, --redo or --fail")
    return choice


def cmd_resolve(args: argparse.Namespace) -> int:
    check_run_id(args.run_id, source="RUN")
    choice = _choice(args)
    result = parse_result(args.confirm) if choice == "confirm" else None
    settings = config.from_env()
    if choice is not None:
        conn = _reading(settings)
        try:
            resolved = resolve_call(
                conn, args.run_id, args.seq, choice, result=result, reason=args.reason
            )
        finally:
            conn.close()
        _print_result(resolved, format_call_resolution, as_json=args.json)
        return 0
    conn = _reading(settings)
    try:
        attention = read_history(conn, args.run_id).attention
    finally:
        conn.close()
    if attention is not None:  # explain the choices; re-sending is what must not happen
        _print_result(attention, format_attention, as_json=args.json)
        return EXIT_USAGE
    resolution = resolve_run(settings, database_url(settings), args.run_id, takeover=args.takeover)
    _print_result(resolution, format_resolution, as_json=args.json)
    return 0


def _seq(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"a step number, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"a step number is 0 or more, got {value}")
    return value


def cmd_cancel(args: argparse.Namespace) -> int:
    conn = _reading(config.from_env())
    try:
        cancellation = cancel_run(conn, args.run_id, args.reason)
    finally:
        conn.close()
    _print_result(cancellation, format_cancellation, as_json=args.json)
    return 0


def cmd_retry(args: argparse.Namespace) -> int:
    check_run_id(args.run_id, source="RUN")
    conn = _reading(config.from_env())
    try:
        retry = retry_run(conn, args.run_id)
    finally:
        conn.close()
    _print_result(retry, format_retry, as_json=args.json)
    return 0


def _statuses(text: str) -> list[str]:
    chosen = [s.strip() for s in text.split(",") if s.strip()]
    unknown = [s for s in chosen if s not in STATUSES]
    if unknown or not chosen:
        shown = escape(", ".join(unknown)) if unknown else repr(text)
        raise argparse.ArgumentTypeError(f"unknown status {shown}; one of {', '.join(STATUSES)}")
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
    """Add ``runs``, ``show``, ``resolve``, ``cancel`` and ``retry`` to the CLI's subcommands."""
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
    runs.add_argument("--agent", metavar="NAME", help="only runs of this agent (its name)")
    runs.add_argument(
        "--limit",
        type=_limit,
        default=DEFAULT_LIMIT,
        help=f"at most this many, most recent first (default {DEFAULT_LIMIT}; 0: all)",
    )
    runs.add_argument(
        "--after",
        metavar="CURSOR",
        help="the next page: the runs after the last one of the page that printed CURSOR "
        "(its `next` in --json)",
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
        help="re-send a run's intents that have no confirm, under the same keys (no new step); "
        "or, for a run that needs attention, decide its call in doubt (--seq N and a choice)",
        description="Without --seq: re-send the run's intents that have no confirm, by their "
        "contracts, and take no further step. A run that needs attention (a 'once' call in "
        "doubt: nothing can tell whether it acted) is never re-sent on its own: give --seq N "
        "and one of --confirm JSON (it acted; JSON is its result, which the model sees), "
        "--redo (it did not act: the next worker sends it once more) or --fail (give it up: "
        "the model sees it failed, with --reason). The run then goes back to pending.",
    )
    resolve.add_argument("run_id", metavar="RUN")
    resolve.add_argument(
        "--takeover",
        action="store_true",
        help="take the run even from a worker whose lease is live (it is fenced out)",
    )
    resolve.add_argument(
        "--seq", type=_seq, metavar="N", help="the call in doubt of a run that needs attention"
    )
    choices = resolve.add_mutually_exclusive_group()
    choices.add_argument(
        "--confirm",
        metavar="JSON",
        help="the call acted: JSON is its result (remote_status operator)",
    )
    choices.add_argument(
        "--redo", action="store_true", help="the call did not act: send it once more"
    )
    choices.add_argument(
        "--fail", action="store_true", help="give the call up: the model sees it failed"
    )
    resolve.add_argument("--reason", help="why (recorded; --fail shows it to the model)")
    resolve.add_argument("--json", action="store_true", help="print the outcome as JSON")
    resolve.set_defaults(func=cmd_resolve)

    cancel = sub.add_parser(
        "cancel", help="stop a pending or running run for good; its worker stops at its next write"
    )
    cancel.add_argument("run_id", metavar="RUN")
    cancel.add_argument("--reason", help="recorded in the run's failure column")
    cancel.add_argument("--json", action="store_true", help="print the outcome as JSON")
    cancel.set_defaults(func=cmd_cancel)

    retry = sub.add_parser(
        "retry",
        help="put a failed run back to pending (or end a free run's backoff now): attempts "
        "and the give-up clock start again, the old failure stays in its history",
    )
    retry.add_argument("run_id", metavar="RUN")
    retry.add_argument("--json", action="store_true", help="print the outcome as JSON")
    retry.set_defaults(func=cmd_retry)
