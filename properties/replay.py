"""``python -m properties.replay FILE --mode inprocess|process``: replay one schedule.

Replays a saved schedule (``properties/failures/*.json``, or any file in that
format, or a bare JSON list of events) event by event, checks the invariants
after each, settles every run and checks the end state. Prints the trace and
either the first violation (exit 1) or the outcome (exit 0). The same schedule
gives the same outcome every time, in either mode.

Modes: ``inprocess`` (threads, in-process mocks: fast), ``process`` (forked
worker processes dying with ``os._exit(1)``/``SIGKILL``, frozen with
``SIGSTOP``, mocks under uvicorn over HTTP), ``exec`` (the same with a fresh
interpreter per worker).

The database is a throwaway PostgreSQL of the suite's own, started for the replay
and removed after it (``properties.server.SuiteDatabase``): a schedule may crash it.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Sequence

from .events import Schedule, ScheduleError, program
from .invariants import Violation, Violations
from .runner import ScheduleRunner
from .runners import make_runner, suite_database
from .variants import CORRECT, VARIANTS


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m properties.replay",
        description="Replay a saved crash schedule and check every invariant.",
    )
    parser.add_argument("file", help="a schedule JSON file (properties/failures/*.json)")
    parser.add_argument(
        "--mode",
        choices=("inprocess", "process", "exec", "pool"),
        default="inprocess",
        help="inprocess (threads), process (forked workers, real signals), exec, or pool "
        "(the real supervisor and its pool workers)",
    )
    parser.add_argument(
        "--variant",
        choices=(CORRECT.name, *VARIANTS),
        help="runtime to replay against (default: the one the file names, else correct)",
    )
    parser.add_argument("--json", action="store_true", help="print the outcome as JSON")
    parser.add_argument(
        "--verbose", action="store_true", help="show the runtime's own log lines (stderr)"
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.CRITICAL)
    try:
        schedule = Schedule.load(args.file)
    except ScheduleError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    variant = args.variant or schedule.variant or CORRECT.name
    print(f"schedule {args.file}: {len(schedule.events)} events, runtime {variant}, "
          f"mode {args.mode}, seed {schedule.seed}")  # fmt: skip
    print(program(schedule.events))
    with suite_database() as database:
        return _replay(args, schedule, make_runner(args.mode, database, variant=variant))


def _replay(args: argparse.Namespace, schedule: Schedule, runner: ScheduleRunner) -> int:
    try:
        runner.warm()
        runner.reset()
        step = "settle"
        try:
            for i, event in enumerate(schedule.events, 1):
                step = f"event {i} ({event})"
                runner.apply(event)
                runner.check()
            step = "settle"
            runner.settle()
            runner.check_final()
        except (Violation, Violations) as exc:
            _trace(runner.trace)
            print(f"\nVIOLATION after {step}:\n  {exc}")
            return 1
        _trace(runner.trace)
        outcome = runner.outcome()
        if args.json:
            print(json.dumps(outcome, indent=2, sort_keys=True))
        else:
            print("\nno violation; every run finished like the crash-free run")
            for run in sorted(k for k in outcome if k != "resources"):
                o = outcome[run]
                tools = [d[1] for d in o["decisions"]]
                statuses = [c[3] for c in o["calls"]]
                print(f"  {run}: {o['status']} tools={tools} remote={statuses} "
                      f"model_calls={o['model_calls']}")  # fmt: skip
        return 0
    finally:
        runner.close()


def _trace(lines: list[str]) -> None:
    print("\ntrace:")
    for line in lines:
        print(f"  {line}")


if __name__ == "__main__":
    sys.exit(main())
