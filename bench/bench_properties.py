"""Throughput of the property suite's two runners: a benchmark, not a test.

    python bench/bench_properties.py [--examples 60] [--cycles 10] [--json]

Uses ``DATABASE_URL`` (emptied) if set, else a throwaway local cluster, like the
other benchmarks (``bench/_setup.py``). Measures, for the
in-process runner (threads, in-process mocks) and the process runner (forked
workers, mocks under uvicorn):

- **examples/s**: the state machine under the ``ci`` profile (the same
  derandomized schedules for both runners; no shrinking, nothing fails), events
  and crash-restarts per second along the way;
- **crash-restarts/s**: a schedule that does nothing but crash a run at each of
  the seven points in turn and restart it (a crash, then a worker rebuilt from
  the database that resumes the run), replayed ``--cycles`` times end to end
  (resets, checks and the final settle included).

Figures depend on the machine and on the database's fsync; the first run of a
process runner includes starting uvicorn.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # properties/ is not installed

from _setup import database
from agent_runtime.crash import CRASH_POINTS
from properties.events import Event
from properties.machine import explore
from properties.runner import ScheduleRunner
from properties.runners import InProcessRunner, ProcessRunner


def machine_throughput(runner: ScheduleRunner, examples: int) -> dict[str, float]:
    result = explore(
        runner, profile="ci", name="bench", max_examples=examples, phases=_generate_only()
    )
    if result.error is not None:
        raise SystemExit(f"the benchmark found a failure, fix that first: {result.error}")
    seconds = result.elapsed
    s = result.stats
    return {
        "examples": s.examples,
        "seconds": round(seconds, 2),
        "examples_per_s": round(s.examples / seconds, 1),
        "events_per_s": round(s.events / seconds, 1),
        "crash_restarts_per_s": round(min(s.crashes, s.restarts) / seconds, 1),
    }


def _generate_only() -> Any:
    from hypothesis import Phase

    return [Phase.generate]


def crash_restart_cycles(runner: ScheduleRunner, cycles: int) -> dict[str, float]:
    """Replay ``cycles`` times: start r0, then crash it at each of the seven points in
    turn, restarting it after each (every crash fires, on step 0), then settle."""
    events = [Event(op="start", run=0)]
    for point in CRASH_POINTS:
        events += [Event(op="crash", run=0, point=point), Event(op="restart", run=0)]
    runner.baseline()
    runner.stats.crashes = 0
    began = time.monotonic()
    for _ in range(cycles):
        runner.replay(events)
    seconds = time.monotonic() - began
    crashes = runner.stats.crashes
    if crashes != cycles * len(CRASH_POINTS):
        raise SystemExit(f"expected {cycles * len(CRASH_POINTS)} crashes, {crashes} fired")
    return {
        "cycles": cycles,
        "crashes_fired": crashes,
        "seconds": round(seconds, 2),
        "crash_restarts_per_s": round(crashes / seconds, 1),
    }


def measure(url: str, examples: int, cycles: int) -> dict[str, Any]:
    figures: dict[str, Any] = {}
    makers: dict[str, Any] = {
        "inprocess": lambda: InProcessRunner(url),
        "process (fork)": lambda: ProcessRunner(url, spawn="fork"),
    }
    for name, make in makers.items():
        runner = make()
        try:
            runner.baseline()
            figures[name] = {
                "machine": machine_throughput(runner, examples),
                "crash_restart": crash_restart_cycles(runner, cycles),
            }
        finally:
            runner.close()
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--examples", type=int, default=60, help="machine examples per runner")
    parser.add_argument(
        "--cycles", type=int, default=10, help="seven-crash schedules replayed per runner"
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.CRITICAL)
    with database() as url:
        figures = measure(url, args.examples, args.cycles)
    if args.json:
        print(json.dumps(figures, indent=2))
        return 0
    print(f"{'runner':16} {'examples/s':>10} {'events/s':>9} {'crash-restarts/s':>17}"
          f" {'(cycle loop)':>13}")  # fmt: skip
    for name, f in figures.items():
        m, c = f["machine"], f["crash_restart"]
        print(
            f"{name:16} {m['examples_per_s']:>10} {m['events_per_s']:>9} "
            f"{m['crash_restarts_per_s']:>17} {c['crash_restarts_per_s']:>13}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
