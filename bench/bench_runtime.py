"""Whole runs of the seed's agent per second, next to the floor the database allows.

    python bench/bench_runtime.py [--runs 300] [--rounds 3]

Runs the provisioning agent in-process against zero-latency in-process mocks (no
sockets), one worker on one connection, run after run. A run is three tool steps (a
server, a database, a DNS record) and its fixed costs: creating and claiming the run,
reading its history, the final answer (``done``, which is no step) and finishing it.

What it compares:

- **runtime**: confirmed tool steps per second over whole runs (``Outcome.steps``, so the
  final ``done`` is not counted), the runs' fixed costs included; once more with the
  seconds spent inside the mocks taken out;
- **floor**: what PostgreSQL allows a step that must be durable before it acts: two raw
  durable single-row commits per step (the decision and the intent wait for the WAL
  flush; the confirm does not), timed in the same process on the same server, alternating
  with the runtime's rounds.

Because the runtime's figure carries each run's fixed costs over only three steps, the
ratio is what a short run pays per step, not the marginal cost of a step:
``bench/bench_step.py`` measures that (long runs minus empty runs). Not a test.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _loop import Timed
from _setup import database, fresh_journal, print_settings, scratch
from _wal import RawCommit
from agent_runtime import Settings, Worker
from mock_remotes import Cloud, Model, cloud_transport, model_transport

DURABLE_PER_STEP = 2  # commits that wait for the flush: the decision and the intent
FLOOR_COMMITS = 300  # raw commits timed per round


def runtime_steps_per_second(url: str, runs: int, state: Path) -> tuple[float, float, int]:
    """(steps/s overall, steps/s with the mocks' own time taken out, steps)."""
    fresh_journal(url)
    cloud = Cloud(state / "cloud.sqlite3", synchronous="OFF")  # its durability is not measured
    cloud_t, model_t = Timed(cloud_transport(cloud)), Timed(model_transport(Model()))
    worker = Worker.open(
        Settings(database_url=url),
        url,
        model_transport=model_t,
        cloud_transport=cloud_t,
        heartbeat=False,
    )
    steps = 0
    try:
        start = time.perf_counter()
        for i in range(runs):
            steps += worker.run(f"bench-{i}").steps
        elapsed = time.perf_counter() - start
    finally:
        worker.close()
        cloud.close()
    mocks = cloud_t.seconds + model_t.seconds
    return steps / elapsed, steps / (elapsed - mocks), steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    if args.runs < 1 or args.rounds < 1:
        parser.error("--runs and --rounds must be at least 1")
    with database() as url, scratch() as state:
        print_settings(url)
        raw = RawCommit(url)
        runtime, own, floor = [], [], []
        steps = 0
        try:
            for _ in range(args.rounds):
                floor.append(1 / (DURABLE_PER_STEP * raw.block(FLOOR_COMMITS)))
                overall, without_mocks, steps = runtime_steps_per_second(url, args.runs, state)
                runtime.append(overall)
                own.append(without_mocks)
            floor.append(1 / (DURABLE_PER_STEP * raw.block(FLOOR_COMMITS)))
        finally:
            raw.close()
    r, o, f = statistics.median(runtime), statistics.median(own), statistics.median(floor)
    print(
        f"runtime:        {r:8.0f} confirmed tool steps/s (median of {args.rounds} rounds of "
        f"{args.runs} runs, {steps} steps each; fixed costs of a run included)"
    )
    print(f"  minus mocks:  {o:8.0f} steps/s (time inside the in-process mocks taken out)")
    print(
        f"floor:          {f:8.0f} steps/s of {DURABLE_PER_STEP} raw durable single-row "
        f"commits ({1e3 / (f * DURABLE_PER_STEP):.3f} ms each, median of {len(floor)} blocks)"
    )
    print(
        f"ratio:          {f / r:8.2f}x the floor's time per step "
        f"({f / o:.2f}x without the mocks' time)"
    )


if __name__ == "__main__":
    main()
