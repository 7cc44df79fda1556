"""``python -m properties.mutation``: run mutants against the suite and report.

Without ``--modules`` or ``--sql`` every module and every SQL statement of the tier is
mutated: ``--tier protocol`` (the default) the protocol's, killed by
:mod:`.check`; ``--tier tests`` what the protocol never runs, each killed by its own
``tests/`` files (:mod:`.tiers`, :mod:`.testtier`); ``--tier all`` both. Each mutant
runs its own tier's killing command.
``--limit N`` samples at most N mutants of each module, deterministically (``--seed``).
Results go to ``--results`` (JSON lines; mutants already there are not run again, so a
run resumes, and runs add up); the report covers every result in that file.

Exit status: 0 done (survivors are in the report), 2 the suite fails on the unmutated
runtime, or the copy of the package was not what the command imported.
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Final, TypeVar

from cosmic_ray.testing import run_tests
from cosmic_ray.work_item import TestOutcome

from ..server import DATADIR_ENV, SuiteDatabase
from . import pymutants, report, sqlmutants, tiers
from .mutants import Mutant
from .overlay import Overlay

ROOT: Final = Path(__file__).resolve().parents[2]
OUT: Final = ROOT / "reports" / "mutation"
TIMEOUT_FACTOR: Final = 4  # a mutant may take this many times the unmutated run
MIN_TIMEOUT: Final = 120.0  # seconds
# modules only the real supervisor runs: their mutants get the command's pool stage too
POOL_MODULES: Final = frozenset({"supervisor", "supervision", "takeback", "unserved", "workerpool"})
# statements only the real supervisor sends (its give-up, takeback, unserved): these too
POOL_QUERIES: Final = frozenset(
    {"held_runs", "unserved_runs", "expire_lease_of", "give_up_exhausted"}
)
# statements the real supervisor sends and the suite's sweep mimics: the pool stage too
# (only the real supervisor serves a subset of the agents: claim_expired's agent filter)
MIMICKED_QUERIES: Final = frozenset({"claim_expired"})
# modules that prove an owner dead by its pid: their mutants get the process stage too
PROCESS_MODULES: Final = frozenset({"lease", "claiming"})
T = TypeVar("T")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m properties.mutation", description=__doc__)
    parser.add_argument(
        "--modules", nargs="*", choices=tuple(pymutants.ALL_PATHS), help="Python modules to mutate"
    )
    parser.add_argument(
        "--tier",
        choices=(*tiers.TIERS, "all"),
        default=tiers.PROTOCOL,
        help="protocol (default): killed by the suite; tests: by their tests/ files; all",
    )
    parser.add_argument("--sql", action="store_true", help="mutate the runtime's SQL")
    parser.add_argument(
        "--queries", nargs="*", help="only these named queries ('fenced': the fenced writes)"
    )
    parser.add_argument(
        "--operators", nargs="*", help="only mutants of these operators (e.g. flip_comparison)"
    )
    parser.add_argument("--ids", nargs="*", help="only the mutants of these ids")
    parser.add_argument(
        "--no-baseline",
        action="store_true",
        help="do not run the unmutated runtime first (needs --timeout)",
    )
    parser.add_argument("--limit", type=int, help="at most this many mutants per module")
    parser.add_argument("--seed", type=int, default=0, help="of the sample (default 0)")
    parser.add_argument("--timeout", type=float, help="seconds per mutant (default: measured)")
    parser.add_argument("--budget", type=float, help="start no mutant after this many seconds")
    parser.add_argument("--results", type=Path, default=OUT / "results.jsonl")
    parser.add_argument("--report", type=Path, default=OUT / "report.md")
    parser.add_argument("--annotations", type=Path, default=report.ANNOTATIONS)
    parser.add_argument("--list", action="store_true", help="list the mutants, run nothing")
    parser.add_argument(
        "--report-only", action="store_true", help="write the report of --results, run nothing"
    )
    parser.add_argument(
        "--scope-only", action="store_true", help="kill with the small scope alone (quick)"
    )
    return parser


def select(args: argparse.Namespace, package: Path) -> tuple[list[Mutant], dict[str, int]]:
    """The mutants to run, module by module, sampled; and the places left out, by reason."""
    python = (
        args.modules
        if args.modules is not None
        else ([] if args.sql else list(pymutants.ALL_PATHS))
    )
    python = [
        m
        for m in python
        if _in_tier(args, m, "")
        or any(k[0] == m and _in_tier(args, *k) for k in tiers.PY_DEF_TESTS)
    ]
    chosen: list[Mutant] = []
    excluded: dict[str, int] = {}
    for module in python:
        found = pymutants.enumerate_module(package, module)
        for why, n in found.excluded.items():
            excluded[f"{module}: {why}"] = n
        places = _sample(found.mutants, args, module)
        made = [pymutants.mutant(package, module, p) for p in places]
        chosen += [m for m in made if m is not None and _in_tier(args, m.module, m.where)]
        if None in made:  # not Python (or nothing changed): no verdict to give
            excluded[f"{module}: not Python"] = made.count(None)
    if args.sql or args.modules is None:
        names = args.queries
        if names and "fenced" in names:
            text = (package / "sql" / "queries.sql").read_text("utf-8")
            names = [n for n in names if n != "fenced"] + sqlmutants.fenced_writes(text)
        by_module: dict[str, list[Mutant]] = {}
        for m in sqlmutants.mutants(package, names=names):
            if not _in_tier(args, m.module, m.where):
                continue
            by_module.setdefault(m.module, []).append(m)
        for module, ms in by_module.items():
            chosen += _sample(ms, args, module)
    if args.operators:
        chosen = [m for m in chosen if m.operator in args.operators]
    if args.ids:
        chosen = [m for m in chosen if m.id in args.ids]
    return _interleaved(chosen), excluded


def _in_tier(args: argparse.Namespace, module: str, where: str) -> bool:
    return bool(args.tier == "all" or tiers.tier_of(module, where) == args.tier)


def _command(mutant: Mutant, protocol: str) -> str:
    """The mutant's own tier's killing command (``protocol``: the suite's, as run)."""
    if tiers.tier_of(mutant.module, mutant.where) == tiers.TESTS:
        files = " ".join(tiers.killers(mutant.module, mutant.where))
        return f"{sys.executable} -m properties.mutation.testtier {files}"
    if mutant.where in MIMICKED_QUERIES:  # the suite's sweep sends it, and the supervisor
        return f"{protocol} --pool"
    if mutant.module in POOL_MODULES or mutant.where in POOL_QUERIES:
        # the schedules never reach the supervisor nor send these statements (check.py
        # printed "supervisor imported: []" after them in every run of the first rounds):
        # the statement corners (sql_corners: the watchdog's and the give-up's statements,
        # a supervisor's late release) and the pool stage judge these mutants
        return f"{protocol} --pool-only"
    return protocol + " --process" * (mutant.module in PROCESS_MODULES)


def _interleaved(mutants: list[Mutant]) -> list[Mutant]:
    """Module by module in turn, so that a budget spent halfway covers every module."""
    queues: dict[str, list[Mutant]] = {}
    for m in mutants:
        queues.setdefault(m.module, []).append(m)
    out: list[Mutant] = []
    while any(queues.values()):
        for queue in queues.values():
            if queue:
                out.append(queue.pop(0))
    return out


def _sample(items: list[T], args: argparse.Namespace, module: str) -> list[T]:
    if args.limit is None or args.limit >= len(items):
        return items
    picked = sorted(random.Random(f"{args.seed}:{module}").sample(range(len(items)), args.limit))
    return [items[i] for i in picked]


def run_one(mutant: Mutant, overlay: Overlay, command: str, timeout: float) -> report.Result:
    began = time.monotonic()
    with overlay.applied(mutant):
        outcome, output = run_tests(_command(mutant, command), timeout)
    seconds = time.monotonic() - began
    if output == "timeout":
        status, detail = "timeout", f"no verdict within {timeout:.0f}s"
    elif f"agent_runtime={overlay.package}" not in output:
        status, detail = "error", "the command did not import the mutated copy: " + _tail(output)
    elif "no verdict:" in output:
        status, detail = "error", _lines(output, "no verdict:")
    elif outcome == TestOutcome.SURVIVED:
        status, detail = "survived", _lines(output, "in-process:", "survived:")
    elif outcome == TestOutcome.KILLED:
        status = "killed"
        detail = _lines(output, "in-process:", "killed:", "after:", "schedule:") or _tail(output)
    else:
        status, detail = "error", _tail(output)
    return report.Result(
        id=mutant.id,
        module=mutant.module,
        where=mutant.where,
        operator=mutant.operator,
        line=mutant.line,
        status=status,
        seconds=round(seconds, 1),
        detail=detail,
        diff=mutant.diff,
    )


def _lines(output: str, *prefixes: str) -> str:
    return "\n".join(row for row in output.splitlines() if row.startswith(prefixes))


def _tail(output: str) -> str:
    return "\n".join(output.strip().splitlines()[-3:])


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    # A stopped run (a cancelled job, a kill) still puts the copy away and stops its cluster.
    signal.signal(signal.SIGTERM, _stop)
    os.chdir(ROOT)
    overlay = Overlay()
    try:
        mutants, excluded = select(args, overlay.package)
        done = report.load_results(args.results)
        todo = [m for m in mutants if m.id not in done]
        print(f"{len(mutants)} mutants selected, {len(todo)} not run yet", flush=True)
        if args.report_only:
            _write_report(args, {"places left out (equivalent by construction)": excluded})
            return 0
        if args.list:
            for m in mutants:
                print(f"{m.id}  line {m.line}")
            return 0
        return _run(args, overlay, todo, excluded)
    finally:
        overlay.close()


def _run(
    args: argparse.Namespace, overlay: Overlay, todo: list[Mutant], excluded: dict[str, int]
) -> int:
    database = SuiteDatabase()  # one cluster for every mutant's command
    os.environ.update(overlay.environ())
    os.environ[DATADIR_ENV] = str(database.cluster.datadir)
    command = f"{sys.executable} -m properties.mutation.check"
    if args.scope_only:
        command += " --no-hypothesis"
    began = time.monotonic()
    try:
        if args.no_baseline and args.timeout:
            baseline = 0.0
        else:
            # each killing command the mutants need, once, on the unmutated copy
            commands = dict.fromkeys(_command(m, command) for m in todo)
            for each in commands or [command]:
                outcome, output = run_tests(each, args.timeout or 3600)
                if (
                    outcome != TestOutcome.SURVIVED
                    or f"agent_runtime={overlay.package}" not in output
                ):
                    print(f"the unmutated runtime does not pass {each}, or the copy was not used:"
                          f"\n{output}")  # fmt: skip
                    return 2
            baseline = (time.monotonic() - began) / max(1, len(commands))
        timeout = args.timeout or max(MIN_TIMEOUT, TIMEOUT_FACTOR * baseline)
        print(f"unmutated: passed in {baseline:.1f}s; timeout per mutant {timeout:.0f}s")
        for i, mutant in enumerate(todo, 1):
            if args.budget is not None and time.monotonic() - began > args.budget:
                print(f"budget spent: {len(todo) - i + 1} mutants not run")
                break
            result = run_one(mutant, overlay, command, timeout)
            report.append_result(args.results, result)
            print(f"[{i}/{len(todo)}] {result.status:8} {result.seconds:6.1f}s {mutant.id}")
            print("    " + result.detail.replace("\n", "\n    "), flush=True)
    finally:
        database.close()
    _write_report(
        args,
        {
            "tier": args.tier,
            "command": "python -m properties.mutation.check"
            + (" --no-hypothesis" if args.scope_only else "")
            + (" (--pool-only for " + ", ".join(sorted(POOL_MODULES | POOL_QUERIES)) + ")")
            + (" (--pool for " + ", ".join(sorted(MIMICKED_QUERIES)) + ")")
            + (" (--process for " + ", ".join(sorted(PROCESS_MODULES)) + ")")
            + "; tests tier: python -m properties.mutation.testtier <its tests/ files>",
            "unmutated seconds": round(baseline, 1),
            "timeout per mutant": round(timeout, 1),
            "places left out (equivalent by construction)": excluded,
            "seed": args.seed,
            "limit per module": args.limit,
        },
    )
    return 0


def _write_report(args: argparse.Namespace, context: dict[str, object]) -> None:
    results = report.load_results(args.results)
    annotations = report.load_annotations(args.annotations)
    data = report.write(results, annotations, args.report, context=context)
    for tier, modules in data["tiers"].items():
        for module, row in modules.items():
            print(
                f"{tier} tier, {module}: {row['killed'] + row['timeout']}/{row['total']} killed "
                f"({row['timeout']} by timeout), {row['survived']} survived "
                f"({row['equivalent']} equivalent)"
            )
    print(f"report: {args.report}")


def _stop(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


if __name__ == "__main__":
    sys.exit(main())
