"""The ``crashresume`` command (also ``python -m crashresume``).

crashresume --selftest [--mode process]
crashresume --version
crashresume check MODULE:FACTORY --inputs A B C [--mode process] [--crashes 2]
                  [--only SCENARIO] [--json PATH] [--timeout S] [--workers N]
                  [--explore hypothesis] [--max-examples N] [--seed N]
                  [--scenarios crash overlap] [--repeat N]
                  [--faults KIND ...] [--expect NAME=N ...] [--at-most-once NAME ...]
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from crashresume._faults import FAULTS
from crashresume._watchdog import DEFAULT_TIMEOUT

EXIT_PASSED = 0  # conform found nothing / the selftest matched
EXIT_FINDINGS = 1  # conform reported at least one finding
EXIT_USAGE = 2  # bad arguments, a module or factory that cannot be loaded
EXIT_SELFTEST_MISMATCH = 3  # a selftest finding was missing or appeared where not expected
EXIT_NOT_RUN = 4  # the subject could not be judged: its baseline raised, or process mode failed

_EPILOG = """\
exit status:
  0  passed: no findings (or, with --selftest, every expected finding and nothing else)
  1  the report has findings
  2  usage error: bad arguments, a MODULE:FACTORY that cannot be imported, a bad --only
  3  --selftest mismatch: an expected finding was missing or an unexpected one appeared
  4  not judged: the crash-free baseline raised, or process mode failed

scenario ids: run-<k> dies right after effect call k, run-before-<k> right before it;
'-then-' chains a crash during the recovery (crashes=2), e.g. run-3-then-before-1;
run-overlap-<k> (run-overlap-before-<k>) freezes the first run there instead, runs its
restart, then wakes it (--scenarios overlap).
run-<fault>-<k>: effect call k met that fault (--faults), e.g. run-lost-2.
"""


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("crashresume")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown (not installed)"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="crashresume",
        description="Crash a subject at every side-effect boundary, restart it, and report "
        "duplicated or lost effects, lost or diverging state, and resumes that raise.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--selftest",
        action="store_true",
        help="run a conforming subject and broken ones; check each finding appears exactly "
        "where expected",
    )
    parser.add_argument("--version", action="version", version=f"crashresume {_version()}")
    modes = ("inprocess", "process")
    parser.add_argument(
        "--mode", choices=modes, default="inprocess", help="isolation (default: inprocess)"
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log every scenario")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    check = commands.add_parser(
        "check",
        help="run conform on MODULE:FACTORY",
        description="Run conform(FACTORY, inputs=...) and print the report.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    check.add_argument("target", metavar="MODULE:FACTORY", help="e.g. myproject.agents:make_agent")
    check.add_argument("--inputs", nargs="+", required=True, metavar="INPUT", help="the inputs")
    check.add_argument("--mode", choices=modes, default=argparse.SUPPRESS, help="isolation")
    check.add_argument(
        "--crashes",
        type=int,
        default=None,
        help="crashes per scenario (default 1; 2 also crashes once during each recovery; "
        "with --explore hypothesis the most a schedule has, default 5)",
    )
    check.add_argument("--only", metavar="SCENARIO", help="run just this scenario, e.g. run-3")
    check.add_argument(
        "--json",
        metavar="PATH",
        help="write the JSON report here; '-': only the JSON on stdout, the text on stderr",
    )
    check.add_argument(
        "--timeout",
        type=float,
        default=DEFAULT_TIMEOUT,
        metavar="S",
        help=f"seconds one start may take (default {DEFAULT_TIMEOUT:g}; 0: no limit)",
    )
    check.add_argument(
        "--workers", type=int, default=1, metavar="N", help="scenarios at a time (process mode)"
    )
    check.add_argument(
        "--explore",
        choices=("exhaustive", "hypothesis"),
        default="exhaustive",
        help="every crash point of the plan (default), or schedules drawn by Hypothesis",
    )
    check.add_argument("--max-examples", type=int, default=100, metavar="N", help="(hypothesis)")
    check.add_argument("--seed", type=int, metavar="N", help="the Hypothesis seed")
    check.add_argument(
        "--scenarios",
        nargs="+",
        choices=("crash", "overlap"),
        default=["crash"],
        metavar="KIND",
        help="crash (die at each boundary, restart; the default) and/or overlap (freeze the "
        "first run at each boundary, run its restart, then wake it)",
    )
    check.add_argument(
        "--repeat",
        type=int,
        default=1,
        metavar="N",
        help="run every scenario N times (for races); findings say in how many they showed",
    )
    check.add_argument(
        "--faults",
        nargs="+",
        choices=FAULTS,
        metavar="KIND",
        help=f"also inject these faults at every effect call: {', '.join(FAULTS)}",
    )
    check.add_argument(
        "--expect",
        action="append",
        type=_count_rule,
        metavar="NAME=N",
        help="a rule: every run makes exactly N NAME effects (repeatable)",
    )
    check.add_argument(
        "--at-most-once",
        action="append",
        metavar="NAME",
        help="a rule: no NAME effect happens twice with the same argument (repeatable)",
    )
    return parser


def _count_rule(text: str) -> tuple[str, int]:
    name, equals, count = text.rpartition("=")
    if not equals or not name or not count.isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} is not NAME=N; write it like send_invoice=3")
    return name, int(count)


def _load(target: str) -> Callable[..., Any]:
    from crashresume._errors import UsageError

    module_name, _, attribute = target.partition(":")
    if not module_name or not attribute:
        raise UsageError(
            f"{target!r} is not MODULE:FACTORY; write it like myproject.agents:make_agent"
        )
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())  # like `python -m`: modules of the current folder
    try:
        found: Any = importlib.import_module(module_name)
    except Exception as exc:
        raise UsageError(f"cannot import module {module_name!r}: {exc}") from exc
    for part in attribute.split("."):
        try:
            found = getattr(found, part)
        except AttributeError as exc:
            raise UsageError(
                f"module {module_name!r} has no {attribute!r}; name the factory that "
                "takes ctx and returns the subject"
            ) from exc
    if not callable(found):
        raise UsageError(f"{target!r} is a {type(found).__name__}, not a factory function")
    return found  # type: ignore[no-any-return]


def _check(options: argparse.Namespace, mode: str) -> int:
    from crashresume._conform import conform

    factory = _load(options.target)
    report = conform(
        factory,
        inputs=options.inputs,
        crashes=options.crashes,
        mode=mode,
        only=options.only,
        timeout=options.timeout or None,
        workers=options.workers,
        explore=options.explore,
        max_examples=options.max_examples,
        seed=options.seed,
        scenarios=options.scenarios,
        repeat=options.repeat,
        faults=options.faults,
        expect=None if options.expect is None else dict(options.expect),
        at_most_once=options.at_most_once,
    )
    if options.json == "-":  # stdout is for the JSON alone, so that `| jq` works
        print(report, file=sys.stderr)
        print(report.to_json())
        return EXIT_PASSED if report.passed else EXIT_FINDINGS
    print(report)
    if options.json:
        Path(options.json).write_text(report.to_json() + "\n")
    return EXIT_PASSED if report.passed else EXIT_FINDINGS


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status (see ``--help``)."""
    parser = _parser()
    try:
        options = parser.parse_args(argv)
    except SystemExit as exc:  # argparse reports usage errors (and --help) this way
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    logging.basicConfig(
        level=logging.DEBUG if options.verbose else logging.WARNING,
        format="level=%(levelname)s logger=%(name)s %(message)s",
    )
    mode = getattr(options, "mode", "inprocess")
    if options.selftest == (options.command is not None):
        parser.print_usage(sys.stderr)
        print("crashresume: give either --selftest or the check command", file=sys.stderr)
        return EXIT_USAGE
    from crashresume._errors import BaselineError, IsolationError, UsageError

    try:
        if options.selftest:
            from crashresume._selftest import run_selftest

            return EXIT_PASSED if run_selftest(sys.stdout, mode=mode) else EXIT_SELFTEST_MISMATCH
        return _check(options, mode)
    except UsageError as exc:
        print(f"crashresume: usage error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except (BaselineError, IsolationError) as exc:
        print(f"crashresume: not judged: {exc}", file=sys.stderr)
        return EXIT_NOT_RUN
