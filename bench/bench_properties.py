"""Throughput of the property suite's two runners: a benchmark, not a test.

    python bench/bench_properties.py [--examples 60] [--cycles 10] [--json]

Runs on the suite's own PostgreSQL (``properties.server.SuiteDatabase``: a throwaway
cluster, or ``PROPERTIES_PGDATA``), which its ``db_crash`` events crash. Measures, for the
in-process runner (threads, in-process mocks) and the process runner (forked
workers, mocks under uvicorn):

- **examples/s**: the state machine under the ``ci`` profile (the same
  derandomized schedules for both runners; no shrinking, nothing fails), events
  and crash-restarts per second along the way. The machine alone: the small scope's
  grid, which ``explore`` replays first, is timed on its own (**grid**), so neither
  figure divides one part's events by both parts' time;
- **crash-restarts/s**: a schedule that does nothing but crash a run at each of
  the seven points in turn and restart it (a crash, then a worker rebuilt from
  the database that resumes the run), replayed ``--cycles`` times end to end
  (resets, checks and the final settle included).

Figures depend on the machine; the first run of a process runner includes starting
uvicorn. ``PREVIOUS`` holds the figures measured before the suite grew database
crashes, real heartbeats and its new invariants (issue 9), printed beside the new ones.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any, Final

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # properties/ is not installed
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _split import Split, split_line
from agent_runtime.crash import CRASH_POINTS
from properties import scope
from properties.driving import Stats
from properties.events import Event
from properties.exploring import explore
from properties.runner import ScheduleRunner
from properties.runners import InProcessRunner, ProcessRunner, suite_database
from properties.server import SuiteDatabase

# Measured on this 2-core machine before issue 9 (ARCHITECTURE.md, "Throughput").
PREVIOUS: dict[str, dict[str, float]] = {
    "inprocess": {"events_per_s": 251, "crash_restarts_per_s": 11.5, "cycle": 210},
    "process (fork)": {"events_per_s": 27, "crash_restarts_per_s": 1.2, "cycle": 25},
}
# What issue 9 asks of the in-process runner's machine figures on this machine, quiet.
TARGET: Final = {"events_per_s": 500, "crash_restarts_per_s": 50}


def machine_throughput(runner: ScheduleRunner, examples: int) -> dict[str, Any]:
    """The Hypothesis machine alone (``small_scope=False``): its events over its own time,
    and where that time went (:class:`_split.Split`)."""
    split = Split(runner)
    result = explore(
        runner,
        profile="ci",
        name="bench",
        max_examples=examples,
        phases=_generate_only(),
        small_scope=False,
    )
    if result.error is not None:
        raise SystemExit(f"the benchmark found a failure, fix that first: {result.error}")
    rates: dict[str, Any] = _rates(result.stats, result.elapsed, examples=result.stats.examples)
    rates["split"] = split.figures(result.elapsed)
    return rates


def grid_throughput(runner: ScheduleRunner) -> dict[str, float]:
    """The small scope's grid (:mod:`properties.scope`) replayed once, as ``explore`` does
    before Hypothesis starts: short schedules, one disruption each, a settle per schedule."""
    runner.warm()
    runner.stats = Stats()
    with TemporaryDirectory() as scratch:
        began = time.monotonic()
        swept = scope.sweep(runner, name="bench", profile="ci", failures_dir=Path(scratch))
        seconds = time.monotonic() - began
    if swept.finding is not None:
        raise SystemExit(f"the benchmark found a failure, fix that first: {swept.finding.error}")
    return _rates(runner.stats, seconds, examples=swept.tried)


def _rates(s: Stats, seconds: float, *, examples: int) -> dict[str, float]:
    return {
        "examples": examples,
        "seconds": round(seconds, 2),
        "examples_per_s": round(examples / seconds, 1),
        "events_per_s": round(s.events / seconds, 1),
        "crash_restarts_per_s": round(min(s.crashes, s.restarts) / seconds, 1),
        "crashes_per_event": round(s.crashes / s.events, 3) if s.events else 0.0,
        "db_crashes": s.db_crashes,
        "zombies": s.zombies,
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


def measure(
    database: SuiteDatabase, examples: int, cycles: int, modes: list[str]
) -> dict[str, Any]:
    figures: dict[str, Any] = {}
    makers: dict[str, Any] = {
        "inprocess": lambda: InProcessRunner(database.url, server=database),
        "process (fork)": lambda: ProcessRunner(database.url, spawn="fork", server=database),
    }
    makers = {name: make for name, make in makers.items() if name.split()[0] in modes}
    for name, make in makers.items():
        runner = make()
        try:
            runner.baseline()
            figures[name] = {
                "machine": machine_throughput(runner, examples),
                "grid": grid_throughput(runner),
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
    parser.add_argument(
        "--modes", default="inprocess,process", help="runners to measure (inprocess,process)"
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.CRITICAL)
    load_before = os.getloadavg()[0]
    with suite_database() as database:
        figures = measure(database, args.examples, args.cycles, args.modes.split(","))
        restarts = database.crashes
        restart_ms = 1000 * database.restart_seconds / restarts if restarts else 0.0
    # The machine is shared: a figure means little without how busy it was meanwhile.
    load = {"before": round(load_before, 2), "after": round(os.getloadavg()[0], 2)}
    if args.json:
        print(
            json.dumps(
                {**figures, "db_restart_ms": round(restart_ms, 1), "load_1min": load}, indent=2
            )
        )
        return 0
    print(f"{'runner':16} {'examples/s':>10} {'events/s':>9} {'crash-restarts/s':>17}"
          f" {'(cycle loop)':>13}   before: events/s, crash-restarts/s, cycle")  # fmt: skip
    for name, f in figures.items():
        m, c, g, old = f["machine"], f["crash_restart"], f["grid"], PREVIOUS[name]
        print(
            f"{name:16} {m['examples_per_s']:>10} {m['events_per_s']:>9} "
            f"{m['crash_restarts_per_s']:>17} {c['crash_restarts_per_s']:>13}   "
            f"{old['events_per_s']}, {old['crash_restarts_per_s']}, {old['cycle']}\n"
            f"  {m['crashes_per_event']} fired crashes per event of the machine; the small "
            f"scope's grid: {g['examples']} schedules in {g['seconds']} s, {g['events_per_s']} "
            f"events/s, {g['crash_restarts_per_s']} crash-restarts/s, {g['db_crashes']} "
            "database crashes"
        )
        print(split_line(m["split"]))
    print(f"database crash and restart: {restart_ms:.0f} ms on average ({restarts} of them)")
    inprocess = figures.get("inprocess")
    if inprocess is not None:
        m = inprocess["machine"]
        met = all(m[k] >= v for k, v in TARGET.items())
        print(
            f"issue 9's target (in-process, quiet machine): {TARGET['events_per_s']} events/s, "
            f"{TARGET['crash_restarts_per_s']} crash-restarts/s: {'met' if met else 'NOT met'}"
        )
    print(
        f"load average (1 min) of this {os.cpu_count()}-core machine: "
        f"{load['before']} before, {load['after']} after"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
