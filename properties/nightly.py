"""``python -m properties.nightly``: the long randomised hunt.

Runs the state machine under the ``nightly`` profile in rounds, each with a fresh
random seed (the first one can be fixed with ``--seed`` or ``PROPERTIES_SEED``),
until its budget is spent: ``--schedules`` (default 10,000 schedules on one runner)
and, if given, ``--budget`` seconds, whichever comes first. Every round's seed is
logged before it starts; every finding is shrunk, saved as JSON under ``--failures``
(default properties/failures/) and listed at the end with its replay command. The
summary says what the budget bought -- schedules, events, crashes, database crashes,
zombies, operator actions (cancel, retry, resolve choices, counted by kind under
``operators``), requests held in flight and landed, supervisors that died between claim
and hand-out, protocol switches -- and goes to ``--report`` (JSON) for
the workflow's artifacts.

``--mode pool`` hunts with the real supervisor and its long-lived pool workers instead
(:mod:`properties.pool_hunt`): schedules of the pool's own events too (SIGKILL, SIGTERM
and stalls of pool workers, the supervisor's hang-up and SIGTERM, a rival supervisor),
counted in the summary; a finding replays with ``--mode pool``. On a terminal
a progress line shows examples, events, crashes and findings so far.

Exit status: 0 nothing found, 1 at least one finding, 2 bad usage.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import random
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

from .exploring import Exploration, explore
from .machine import FAILURES
from .pool_hunt import Hunt, hunt
from .pool_runner import PoolRunner
from .progress import Progress
from .runner import ScheduleRunner
from .runners import InProcessRunner
from .server import SuiteDatabase

SCHEDULES: Final = 10_000  # the default budget: schedules run on one runner
ROUND_EXAMPLES: Final = 400  # examples per round, each round with a fresh seed
COUNTS: Final = ("examples", "events", "crashes", "db_crashes", "zombies", "restarts")
# the summary's totals read from the runner's counted faults and doings
FAULT_TOTALS: Final = {
    "held_requests": "cloud hold_next",
    "landed": "request landed",
    "orphaned_sweeps": "orphan sweep",  # a supervisor that died between claim and hand-out
    "protocol_switches": "configure model_protocol",  # a deployment's other protocol
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m properties.nightly",
        description="Hunt for crash schedules that break the runtime's invariants.",
        epilog=f"Default budget: {SCHEDULES:,} schedules. Exit 0: nothing found, 1: a finding.",
    )
    parser.add_argument(
        "--schedules", type=int, default=SCHEDULES, help=f"schedules to run (default {SCHEDULES})"
    )
    parser.add_argument("--budget", type=float, help="stop after this many seconds, too")
    parser.add_argument("--seed", type=int, help="seed of the first round (default: random)")
    parser.add_argument("--shard", default="1/1", help="I/N, names this shard's files")
    parser.add_argument("--failures", type=Path, default=FAILURES, help="where findings go")
    parser.add_argument("--report", type=Path, help="write a JSON summary here")
    parser.add_argument("--round-examples", type=int, default=ROUND_EXAMPLES)
    parser.add_argument("--variant", help="hunt in a deliberately broken runtime instead")
    parser.add_argument(
        "--mode",
        choices=("inprocess", "pool"),
        default="inprocess",
        help="inprocess: the state machine over threads (default); pool: schedules against "
        "the real supervisor and its pool workers",
    )
    parser.add_argument(
        "--no-small-scope",
        action="store_true",
        help="skip the small scope's grid (it is the same for every shard: one shard suffices)",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.schedules < 1 or args.round_examples < 1 or (args.budget or 1) <= 0:
        print("error: --schedules, --round-examples and --budget must be positive", file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.CRITICAL)
    shard = args.shard.replace("/", "of")
    first = args.seed if args.seed is not None else os.environ.get("PROPERTIES_SEED")
    began = time.monotonic()
    deadline = None if args.budget is None else began + args.budget
    if args.mode == "pool" and args.variant is not None:
        print("error: --mode pool runs the real runtime only (no --variant)", file=sys.stderr)
        return 2
    database = SuiteDatabase.for_command()
    runner: ScheduleRunner
    if args.mode == "pool":
        runner = PoolRunner(database.url, server=database)
    else:
        runner = InProcessRunner(database.url, variant=args.variant, server=database)
    progress = Progress(f"nightly {args.shard}")
    rounds: list[dict[str, Any]] = []
    findings: list[dict[str, Any]] = []
    totals = dict.fromkeys((*COUNTS, *FAULT_TOTALS, "operator_actions"), 0)
    pool: dict[str, int] = {}  # the pool mode's own doings, summed over the rounds
    operator_totals: dict[str, int] = {}  # cancel, retry, resolve choices, refusals
    try:
        runner.warm()
        while totals["examples"] < args.schedules and (
            deadline is None or time.monotonic() < deadline
        ):
            seed = int(first) if first is not None and not rounds else _fresh_seed()
            print(f"round {len(rounds) + 1} shard {args.shard} seed {seed}", flush=True)
            examples = min(args.round_examples, args.schedules - totals["examples"])
            if isinstance(runner, PoolRunner):
                hunted = hunt(
                    runner,
                    examples=examples,
                    seed=seed,
                    name=f"nightly-pool-{shard}-{seed}",
                    failures_dir=args.failures,
                )
                for key, value in hunted.pool.items():
                    pool[key] = pool.get(key, 0) + value
                result: Exploration | Hunt = hunted
            else:
                result = explore(
                    runner,
                    profile="nightly",
                    seed=seed,
                    name=f"nightly-{shard}-{seed}",
                    failures_dir=args.failures,
                    progress=progress,
                    small_scope=not rounds and not args.no_small_scope,  # the same every round
                    max_examples=examples,
                )
            for key in COUNTS:
                totals[key] += getattr(result.stats, key)
            for key, fault in FAULT_TOTALS.items():
                totals[key] += result.stats.faults.get(fault, 0)
            operators = _operators(result.stats.faults)
            for what, n in operators.items():
                operator_totals[what] = operator_totals.get(what, 0) + n
            totals["operator_actions"] += sum(operators.values())
            rounds.append(
                {
                    "seed": seed,
                    **{key: getattr(result.stats, key) for key in COUNTS},
                    "seconds": round(result.elapsed, 1),
                    "small_scope": getattr(result, "scope_tried", 0),  # grid schedules first
                    "crashes_per_point": result.stats.fired,
                    "faults": result.stats.faults,
                    "operators": operators,
                    "found": result.error is not None,
                }
            )
            for path, schedule in result.saved:
                findings.append({"seed": seed, "file": str(path), "failure": schedule.failure})
            progress.update(totals["examples"], totals["events"], totals["crashes"], force=True)
    finally:
        progress.close()
        runner.close()
        database.close()
    seconds = time.monotonic() - began
    replay_mode = "pool" if args.mode == "pool" else "process"
    print(
        f"nightly shard {args.shard}: {len(rounds)} rounds in {seconds:.0f}s: "
        f"{totals['examples']} schedules, {totals['events']} events, {totals['crashes']} "
        f"crashes, {totals['db_crashes']} database crashes, {totals['zombies']} zombies, "
        f"{totals['operator_actions']} operator actions, {totals['held_requests']} requests "
        f"held in flight ({totals['landed']} landed), {totals['orphaned_sweeps']} orphaned "
        f"sweeps, {totals['protocol_switches']} protocol switches, {len(findings)} findings"
    )
    if pool:
        print("pool: " + ", ".join(f"{n} {what}" for what, n in pool.items()))
    for finding in findings:
        print(f"FINDING seed {finding['seed']}: {finding['failure']}")
        print(f"  replay: python -m properties.replay {finding['file']} --mode {replay_mode}")
    if args.report is not None:
        args.report.parent.mkdir(parents=True, exist_ok=True)
        summary = {"shard": args.shard, "mode": args.mode, "seconds": round(seconds, 1)}
        summary |= {"totals": totals, "pool": pool, "operators": operator_totals}
        args.report.write_text(
            json.dumps({**summary, "rounds": rounds, "findings": findings}, indent=2)
        )
    return 1 if findings else 0


def _operators(faults: dict[str, int]) -> dict[str, int]:
    """The operator's events of a round (cancel, retry, resolve choices, and refusals)."""
    return {what: n for what, n in sorted(faults.items()) if what.startswith("operator ")}


def _fresh_seed() -> int:
    return random.SystemRandom().getrandbits(32)


if __name__ == "__main__":
    sys.exit(main())
