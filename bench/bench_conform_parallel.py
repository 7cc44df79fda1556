"""Serial against parallel process mode, on a subject whose every step sleeps.

    python bench/bench_conform_parallel.py [--inputs 3] [--sleep 0.05] [--crashes 1]
                                           [--workers 1 2 4]

A benchmark, not a test: it prints the wall time of the same conform call for each number
of workers, the speed-up over one worker, and checks that every report is the serial one.
The subject keeps its progress in SQLite (one file per scenario), as a real agent would;
its steps sleep to stand for the model and tool calls that dominate a real start.
"""

from __future__ import annotations

import argparse
import sqlite3
import tempfile
import time
from pathlib import Path

from crashresume import Context, Report, conform


class SlowAgent:
    """Charges each job under a stable key, after a pause; commits progress to SQLite."""

    def __init__(self, ctx: Context, path: Path, pause: float) -> None:
        self.ctx = ctx
        self.pause = pause
        self.db = sqlite3.connect(path)
        with self.db:
            self.db.execute("CREATE TABLE IF NOT EXISTS done (job TEXT PRIMARY KEY)")

    def step(self, job: str) -> None:
        if self.db.execute("SELECT 1 FROM done WHERE job = ?", (job,)).fetchone():
            return
        time.sleep(self.pause)
        self.ctx.effect("charge", job, key=f"charge:{job}")
        with self.db:
            self.db.execute("INSERT INTO done (job) VALUES (?)", (job,))

    def state(self) -> list[str]:
        return sorted(job for (job,) in self.db.execute("SELECT job FROM done"))

    def close(self) -> None:
        self.db.close()


def run(inputs: int, pause: float, crashes: int, workers: int) -> tuple[float, Report]:
    with tempfile.TemporaryDirectory(prefix="crashresume-bench-") as folder:

        def make_agent(ctx: Context) -> SlowAgent:
            return SlowAgent(ctx, Path(folder) / f"{ctx.run_id}.db", pause)

        jobs = [f"job-{i}" for i in range(inputs)]
        started = time.perf_counter()
        report = conform(make_agent, jobs, mode="process", crashes=crashes, workers=workers)
        return time.perf_counter() - started, report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--inputs", type=int, default=3)
    parser.add_argument("--sleep", type=float, default=0.05, help="seconds per step")
    parser.add_argument("--crashes", type=int, default=1)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4])
    options = parser.parse_args()
    serial: tuple[float, Report] | None = None
    for workers in options.workers:
        elapsed, report = run(options.inputs, options.sleep, options.crashes, workers)
        if serial is None:
            serial = (elapsed, report)
        same = report.to_dict() == serial[1].to_dict()
        print(
            f"conform process mode: {options.inputs} inputs, crashes={options.crashes}, "
            f"{len(report.scenarios)} scenarios, step sleep {options.sleep:g} s, "
            f"workers={workers}: {elapsed:.2f} s (x{serial[0] / elapsed:.2f} vs "
            f"workers={options.workers[0]}), report {'identical' if same else 'DIFFERENT'}, "
            f"passed={report.passed}"
        )


if __name__ == "__main__":
    main()
