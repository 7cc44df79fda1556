"""Journaled steps per second, next to the floor the database allows.

    python bench/bench_runtime.py [--runs 300]

Runs agents in-process against zero-latency in-process mocks (no sockets), so
the figure is the runtime's own cost: three fenced writes per step (decision,
intent, confirm) plus the reads a start needs. The floor is measured in the same
run on the same database: three single-row durable commits per step. The ratio
says how close the runtime is to what PostgreSQL allows. Not a test.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _setup import database, fresh_journal, scratch
from agent_runtime import db
from agent_runtime.config import Settings
from agent_runtime.worker import Worker
from mock_remotes import Cloud, Model, cloud_transport, model_transport

STEPS_PER_RUN = 4  # three tools, then "done"


class Timed(httpx.BaseTransport):
    """Counts the seconds spent inside the in-process mocks, to subtract them."""

    def __init__(self, inner: httpx.BaseTransport) -> None:
        self.inner = inner
        self.seconds = 0.0

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        start = time.perf_counter()
        try:
            return self.inner.handle_request(request)
        finally:
            self.seconds += time.perf_counter() - start


def runtime_steps_per_second(url: str, runs: int, state: Path) -> tuple[float, float]:
    """(steps/s overall, steps/s with the mocks' own time taken out)."""
    fresh_journal(url)
    cloud = Cloud(state / "cloud.sqlite3")
    model = Model()
    cloud_t, model_t = Timed(cloud_transport(cloud)), Timed(model_transport(model))
    worker = Worker.open(
        Settings(database_url=url),
        url,
        model_transport=model_t,
        cloud_transport=cloud_t,
        heartbeat=False,
    )
    try:
        start = time.perf_counter()
        for i in range(runs):
            worker.run(f"bench-{i}")
        elapsed = time.perf_counter() - start
    finally:
        worker.close()
        cloud.close()
    steps = runs * STEPS_PER_RUN
    return steps / elapsed, steps / (elapsed - cloud_t.seconds - model_t.seconds)


def floor_steps_per_second(url: str, steps: int) -> float:
    with db.connection(url) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS bench_floor (id bigint, seq int, v text)")
        conn.execute("TRUNCATE bench_floor")
        insert = "INSERT INTO bench_floor (id, seq, v) VALUES (%s, %s, %s)"
        start = time.perf_counter()
        for i in range(steps):
            for write in range(3):
                conn.execute(insert, (i, write, "x"))
        elapsed = time.perf_counter() - start
        conn.execute("DROP TABLE bench_floor")
    return steps / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with database() as url, scratch() as state:
        runtime, own, floor = [], [], []
        for _ in range(args.rounds):
            overall, without_mocks = runtime_steps_per_second(url, args.runs, state)
            runtime.append(overall)
            own.append(without_mocks)
            floor.append(floor_steps_per_second(url, args.runs * STEPS_PER_RUN))
    r, o, f = statistics.median(runtime), statistics.median(own), statistics.median(floor)
    print(f"runtime:        {r:8.0f} journaled steps/s (median of {args.rounds}, {args.runs} runs)")
    print(f"  minus mocks:  {o:8.0f} steps/s (time inside the in-process mocks taken out)")
    print(f"floor:          {f:8.0f} steps/s of 3 durable single-row commits")
    print(f"ratio:          {r / f:8.2f} of the floor ({o / f:.2f} without the mocks' time)")


if __name__ == "__main__":
    main()
