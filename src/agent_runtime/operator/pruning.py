"""``python -m agent_runtime prune``: the operator's command around
:mod:`agent_runtime.store.prune` (which removes the runs)."""

from __future__ import annotations

import argparse

from agent_runtime import config
from agent_runtime.duration import parse_duration
from agent_runtime.errors import ConfigError
from agent_runtime.localpg.dbsource import database_url
from agent_runtime.store import db
from agent_runtime.store.prune import APPLICATION, FINAL, prune


def cmd_prune(args: argparse.Namespace) -> int:
    """``python -m agent_runtime prune``: one line saying how many runs of each it removed."""
    options = {"done": args.done_before, "failed": args.failed_before}
    options["cancelled"] = args.cancelled_before
    older_than = {
        status: parse_duration(text, option=f"--{status}-before")
        for status, text in options.items()
        if text is not None
    }
    if not older_than:
        raise ConfigError(
            "prune needs at least one of --done-before, --failed-before, --cancelled-before "
            "DURATION (e.g. --done-before 30d)"
        )
    with db.connection(database_url(config.from_env()), application_name=APPLICATION) as conn:
        db.require_schema(conn)
        removed = prune(conn, older_than)
    parts = [f"{removed[s]} {s} (older than {options[s]})" for s in older_than]
    print(f"pruned {sum(removed.values())} runs: {', '.join(parts)}", flush=True)
    return 0


def register_prune_command(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    prune_cmd = sub.add_parser(
        "prune",
        help="remove final runs older than a duration, with everything journaled for them",
        description="Remove done, failed or cancelled runs whose last change is older than "
        "DURATION (a whole number and a unit: s, m, h, d, w; e.g. 30d, 12h, 1h30m), with "
        "their steps, claims, retries and resolutions, in short batches that never block a "
        "worker. Runs that are pending, running or need attention are never touched.",
    )
    for status in FINAL:
        prune_cmd.add_argument(
            f"--{status}-before", metavar="DURATION", help=f"remove {status} runs older than this"
        )
    prune_cmd.set_defaults(func=cmd_prune)
