"""``python -m agent_runtime``: run an agent, the demo, and the local database.

Exit codes: 0 done, 1 injected crash, 2 bad usage or configuration (a refused run
id; a remote answering 404/405, which leaves the run resumable), 3 the run failed
(until an operator's ``retry``), 4 stopped but resumable, or backing off (retry
later), 5 another worker owns the run, 6 the run needs attention (a call in doubt that
only an operator can resolve), 7 the run is done but never reached ``CRASH_AT``/``CRASH_SEQ``
(a warning line says so), 70 an unexpected error (a bug: the traceback
is on the ERROR line). Environment variables are read here and nowhere else.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
import uuid
from collections.abc import Sequence

from agent_runtime import config, logfmt
from agent_runtime.localpg.dbsource import database_url
from agent_runtime.logfmt import escape
from agent_runtime.loop.outcome import Outcome
from agent_runtime.loop.worker import Worker
from agent_runtime.store import db
from agent_runtime.store.records import Lease
from agent_runtime.store.runid import check_run_id
from agent_runtime.tools.agent import DEFAULT_AGENT, agents_of

from ._version import version
from .errors import (
    EXIT_CRASH_NOT_REACHED,
    EXIT_SOFTWARE,
    EXIT_USAGE,
    AgentRuntimeError,
)

log = logging.getLogger("agent_runtime")


def _new_run_id() -> str:
    return f"run-{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:4]}"


def _run_id(args: argparse.Namespace) -> str:
    """``--run-id``, else ``$RUN_ID`` (empty counts as unset), else a new id; checked."""
    if args.run_id is not None:
        return check_run_id(args.run_id, source="--run-id")
    configured = os.environ.get("RUN_ID")
    if configured:
        return check_run_id(configured, source="RUN_ID")
    return _new_run_id()


def _print_outcome(outcome: Outcome, task: str | None) -> None:
    """What a finished run was asked and answered, on stdout (the log is on stderr)."""
    from agent_runtime.operator.text import OWN_TASK, answer_text

    print(f"run {outcome.run_id}: {outcome.status}, {outcome.steps} steps")
    print(escape(f"input   {OWN_TASK if task is None else task}"))
    print(escape(f"answer  {answer_text(outcome.output, outcome.status)}"))


def cmd_run(args: argparse.Namespace) -> int:
    settings = config.from_env()
    run_id = _run_id(args)  # before anything is started or written
    agents = agents_of(args.agent)  # a wrong --agent is refused before anything starts
    url = database_url(settings)
    worker = Worker.open(settings, url, agents=agents)
    try:
        lease = None
        if args.owner is not None and args.generation is not None:
            lease = Lease(run_id=run_id, owner=args.owner, generation=args.generation)
        outcome = worker.run(
            run_id, agent=agents[0], input=args.input, lease=lease, create=lease is None
        )
        task = worker.journal.require_run(run_id).input
    finally:
        worker.close()
    _print_outcome(outcome, task)
    if settings.crash.missed(run_id, outcome.steps):
        return EXIT_CRASH_NOT_REACHED
    return 0


def cmd_db(args: argparse.Namespace) -> int:
    from agent_runtime.localpg import dbsource

    home = dbsource.default_home()
    configured = os.environ.get(dbsource.DATABASE_URL_ENV)
    external = f"DATABASE_URL is set ({dbsource.describe_url(configured or '')})"
    if args.action == "start" or args.action == "url":
        if configured:  # stdout stays the URL in use, for $(python -m agent_runtime db url)
            print(
                f"{external}: no local cluster is started; the CLI uses that database.",
                file=sys.stderr,
            )
        print(dbsource.cli_database_url(home))
    elif args.action == "stop":
        cluster = dbsource.cli_cluster(home)
        port = cluster.port if cluster.datadir.exists() else None
        if dbsource.stop_cli_cluster(home):
            print(f"stopped the local cluster in {cluster.datadir} (port {port})")
        else:
            print(f"no local cluster was running in {cluster.datadir}")
        if configured:
            print(f"{external}: that database is not the CLI's to stop, and was not touched.")
    else:
        print(json.dumps(dbsource.cli_cluster_status(home), indent=2, default=str))
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from .demo import run_demo

    return run_demo()


def cmd_schema(args: argparse.Namespace) -> int:
    from agent_runtime.store import migrate

    settings = config.from_env()
    with db.connection(database_url(settings)) as conn:
        place = db.describe_conn(conn)
        if args.status:
            print("\n".join(migrate.describe_status(migrate.status(conn), place)))
            return 0
        before = migrate.read_state(conn).version
        applied = migrate.migrate(conn)
    latest = migrate.known().latest
    if not applied:
        print(f"database {place}: schema version {latest}, nothing to apply")
    elif before == 0:
        print(f"database {place}: schema created whole at version {latest}")
    else:
        done = ", ".join(str(v) for v in applied)
        print(f"database {place}: schema version {before} -> {latest} (applied {done})")
    return 0


# Every environment variable the CLI reads (config.from_env, dbsource, RUN_ID here), as
# its help lists them.
ENVIRONMENT = (
    "RUN_ID (the run to start or resume)",
    "CRASH_AT, CRASH_SEQ (die at this crash point, on this step)",
    "DATABASE_URL (else a local cluster under CRASHRESUME_HOME, default the platform's data "
    "directory, e.g. ~/.local/share/crashresume, or /var/lib/crashresume as root)",
    "CLOUD_URL, MODEL_URL (the remotes)",
    "CRASHRESUME_HOST (this host's name in owner tokens; default: the hostname)",
    "LEASE, HEARTBEAT, POLL, TOOL_TIMEOUT, MODEL_TIMEOUT (seconds)",
    "IN_FLIGHT_MARGIN (seconds a request may still act at its remote after TOOL_TIMEOUT: a "
    "checked call is checked only after both)",
    "MAX_BAD_ANSWERS (answers naming an unknown tool or invalid arguments shown back to "
    "the model before the next one fails the run; default 3)",
    "STUCK_AFTER (seconds a supervised run may make no progress before its worker is "
    "killed; 0: never)",
    "PRUNE_AFTER (a duration such as 30d: a supervisor removes final runs that old; default never)",
    "RUN_BACKOFF, RUN_BACKOFF_CAP (seconds a run stopped by a resumable error waits, first "
    "and at most)",
    "MAX_ATTEMPTS, GIVE_UP_AFTER (claims, and seconds, without progress before the "
    "supervisor fails a run: both must be reached)",
    "MODEL_PROTOCOL (chat: Chat Completions at MODEL_URL, e.g. http://127.0.0.1:8002/v1; "
    "decide: the mock's own; default: the agent's), MODEL_NAME (the model), MODEL_API_KEY "
    "or OPENAI_API_KEY (a bearer token)",
    "CRASHRESUME_HOST (this host's name in owner tokens, unique per host sharing the "
    "database; default: the hostname)",
    "CRASHRESUME_UI_TOKEN (the token `ui` requires of every page and action)",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m agent_runtime",
        description="A durable agent loop: provisions a server, a database and a DNS record, "
        "and survives a crash at any step.",
        epilog=f"Environment: {'; '.join(ENVIRONMENT)}. Exit codes: 0 done, 1 injected crash, "
        "2 usage or configuration, 3 run failed, 4 stopped but resumable (or backing off), "
        "5 run owned by another worker, 6 needs attention (a call in doubt: resolve --seq N), "
        "7 done without reaching CRASH_AT, 70 unexpected error.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {version()}")
    sub = parser.add_subparsers(dest="command")
    run = sub.add_parser("run", help="run (or resume) one agent run (the default command)")
    run.add_argument("--run-id", help="the run to start or resume (default: $RUN_ID or new)")
    run.add_argument(
        "--agent",
        action="append",
        metavar="MODULE:ATTR",
        help=f"the agent of a new run, as package.module:attribute (default {DEFAULT_AGENT})",
    )
    run.add_argument("--input", help="the new run's task (default: the agent's own)")
    run.add_argument("--owner", help=argparse.SUPPRESS)  # set by the supervisor
    run.add_argument("--generation", type=int, help=argparse.SUPPRESS)
    run.set_defaults(func=cmd_run)
    demo = sub.add_parser("demo", help="crash an agent twice and watch it resume")
    demo.set_defaults(func=cmd_demo)
    dbp = sub.add_parser("db", help="the local PostgreSQL the CLI starts by itself")
    dbp.add_argument("action", choices=("start", "stop", "status", "url"))
    dbp.set_defaults(func=cmd_db)
    schema = sub.add_parser(
        "schema",
        help="create the schema, or apply its pending migrations (what every worker does)",
    )
    schema.add_argument(
        "--status", action="store_true", help="print the applied and pending migrations only"
    )
    schema.set_defaults(func=cmd_schema)
    from .operator.commands import register_operator_commands  # runs, show, resolve, cancel

    register_operator_commands(sub)
    from agent_runtime.operator.pruning import register_prune_command

    register_prune_command(sub)
    from agent_runtime.ui.command import register_ui_command  # the dashboard

    register_ui_command(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    logfmt.install()
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        args = parser.parse_args(["run", *(argv or [])])
    try:
        code: int = args.func(args)
    except AgentRuntimeError as exc:
        if not exc.reported:  # a worker that stopped on it already said so, in one line
            log.error("%s error=%r", type(exc).__name__, str(exc))
        return exc.exit_code
    except KeyboardInterrupt:
        return EXIT_USAGE
    except Exception as exc:  # a bug: one ERROR line carrying the traceback, never a raw one
        log.error("unexpected error=%r", f"{type(exc).__name__}: {exc}", exc_info=exc)
        return EXIT_SOFTWARE
    return code
