"""``python -m properties.mutation.check``: the command that kills a mutant.

It runs what CI runs against whatever ``agent_runtime`` this interpreter imports (the
mutation driver points ``PYTHONPATH`` at a mutated copy of the package): the worker's API
as a user calls it and a step's corners as a user's agents meet them
(:mod:`properties.api_corners`, :mod:`properties.api_steps`), whether an owner is
dead where no schedule asks (:mod:`properties.lease_corners`), the statements where two
writers meet or one comes late (:mod:`properties.sql_corners`): seconds; the small
scope's grid (694 schedules, stops at the first violation), then, if the grid
passed, the ``ci`` profile's Hypothesis exploration -- :func:`properties.exploring.explore`,
the same call ``test_variants.py`` makes for each broken runtime. Hypothesis does not
shrink here (a mutant is killed by any failure; which one is told, not minimised).

Exit status: 0 the suite passed (the mutant survived), 3 a violation, 1 anything else
that went wrong (the runtime raised where it must not: killed too). The first line says
which ``agent_runtime`` ran, so the driver can tell the copy was used.
"""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
import time
import traceback
from collections.abc import Sequence
from importlib.util import find_spec
from pathlib import Path
from typing import Final

from hypothesis import Phase

VIOLATION: Final = 3  # exit status of a violation (1: any other failure)
NO_SHRINK: Final = (Phase.explicit, Phase.reuse, Phase.generate, Phase.target)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the check; anything raised is a kill too, and is told on stdout (the driver
    keeps stdout only)."""
    spec = find_spec("agent_runtime")  # where it is, before a mutant's import can fail
    print(f"agent_runtime={Path(spec.origin or '?').parent if spec else None}", flush=True)
    try:
        return _check(argv)
    except Exception as exc:
        frames = traceback.extract_tb(exc.__traceback__)[-3:]
        print(f"killed: {type(exc).__name__}: {(str(exc).splitlines() or [''])[0]}")
        for frame in frames:
            print(f"after: {frame.filename}:{frame.lineno} in {frame.name}")
        return 1


def _check(argv: Sequence[str] | None) -> int:
    parser = argparse.ArgumentParser(prog="python -m properties.mutation.check")
    parser.add_argument("--profile", default="ci")
    parser.add_argument("--no-hypothesis", action="store_true", help="the small scope only")
    parser.add_argument(
        "--pool", action="store_true", help="then the pool mode's checks (poolstage.py)"
    )
    parser.add_argument(
        "--pool-only", action="store_true", help="the pool stage alone (tests, iterating)"
    )
    parser.add_argument(
        "--process",
        action="store_true",
        help="then the death stories with real worker processes (processstage.py)",
    )
    parser.add_argument(
        "--command-only",
        action="store_true",
        help="the pool stage's last step alone: the supervisor's command (tests)",
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.CRITICAL)
    # Imported here, not above: importing the runtime is part of what a mutant may break.
    from .. import profiles as profiles  # registers dev, ci and nightly
    from .. import scope
    from ..api_corners import check_api
    from ..api_steps import check_steps
    from ..events import Schedule
    from ..exploring import explore
    from ..lease_corners import check_owners
    from ..runners import InProcessRunner
    from ..server import SuiteDatabase
    from ..sql_corners import check_races
    from ..violations import Violation, Violations

    began = time.monotonic()
    error: Exception | None
    saved: list[Schedule]
    database = SuiteDatabase.for_command()
    runner = InProcessRunner(database.url, server=database)
    try:
        with tempfile.TemporaryDirectory(prefix="mutant-failures-") as failures:
            if args.command_only:
                api = []
            elif args.pool_only:  # the supervisor's statements where writers meet
                api = check_races(runner)
            else:  # the worker's API, a step's, an owner's death, writers meeting
                api = (
                    check_api(runner)
                    or check_steps(runner)
                    or check_owners()
                    or check_races(runner)
                )
            if api:
                error, stage, saved = Violation("api", None, None, "; ".join(api)), "api", []
            elif args.pool_only or args.command_only:
                stage = "skipped" if args.command_only else "the statement corners"
                error, saved = None, []
            elif args.no_hypothesis:
                runner.warm()
                swept = scope.sweep(
                    runner, name="mutant", profile=args.profile, failures_dir=Path(failures)
                )
                found = swept.finding
                error = None if found is None else found.error
                stage = f"small scope, schedule {swept.tried}"
                saved = [] if found is None else [found.schedule]
            else:
                result = explore(
                    runner,
                    profile=args.profile,
                    name="mutant",
                    failures_dir=Path(failures),
                    phases=NO_SHRINK,
                )
                error = result.error
                saved = [schedule for _, schedule in result.saved]
                in_scope = any("-scope-" in path.name for path, _ in result.saved)
                stage = (
                    f"small scope, schedule {result.found_after}"
                    if in_scope
                    else f"{result.scope_tried} scope schedules, {result.examples} examples"
                )
        if args.command_only:
            from .poolstage import command_stage  # the real supervisor's command

            pooled = command_stage(database)
            error, stage, saved = pooled.error, pooled.stage, []
        elif (args.pool or args.pool_only) and error is None:
            print(f"in-process: passed ({stage}) in {time.monotonic() - began:.1f}s; "
                  f"supervisor imported: {_supervisor_imported()}", flush=True)  # fmt: skip
            from .poolstage import pool_stage  # the real supervisor, imported now

            pooled = pool_stage(runner, database, profile=args.profile)
            error, stage = pooled.error, pooled.stage
            saved = [Schedule(events=tuple(events)) for events in pooled.failing]
        elif args.process and error is None:
            from .processstage import process_stage

            staged = process_stage(database)
            error, stage = staged.error, staged.stage
            saved = [Schedule(events=tuple(staged.failing))] if staged.failing else []
    finally:
        runner.close()
        database.close()
    seconds = time.monotonic() - began
    if error is None:
        print(f"survived: {stage} in {seconds:.1f}s")
        return 0
    first = (str(error).splitlines() or [repr(error)])[0]
    print(f"killed: {type(error).__name__}: {first}")
    print(f"after: {stage} in {seconds:.1f}s")
    for schedule in saved[-1:]:
        print("schedule: " + "; ".join(str(e) for e in schedule.events))
    return VIOLATION if isinstance(error, Violation | Violations) else 1


def _supervisor_imported() -> list[str]:
    """The supervisor's modules this process has imported before the pool stage (the
    statement corners' watchdog and worker handle; the schedules reach none)."""
    return sorted(m for m in sys.modules if m.startswith("agent_runtime.supervisor"))


if __name__ == "__main__":
    sys.exit(main())
