"""How fast one supervisor drains abandoned runs, and how fast it heals a killed worker.

    python bench/bench_supervisor.py [--runs 1000] [--kills 10]

1. Drain: ``--runs`` runs abandoned before any supervisor started (created, never
   claimed) are drained by one supervisor with ``--max-workers`` 1, 2 and 4,
   forking a fresh worker per run, against the mocks under uvicorn with no
   injected latency. Prints runs/s for each.
2. Heal: a worker blocked in a model call is SIGKILLed; the time until the
   supervisor has started its successor is measured ``--kills`` times.
Not a test.
"""

from __future__ import annotations

import argparse
import functools
import logging
import os
import re
import signal
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _setup import database, fresh_journal, scratch
from agent_runtime import db
from agent_runtime.config import Settings
from agent_runtime.journal import Journal
from agent_runtime.supervisor import Supervisor
from mock_remotes import start_mocks

RESUMING = re.compile(r"resuming run=(\S+) pid=(\d+)")


def drain(url: str, cloud_url: str, model_url: str, runs: int, workers: int) -> float:
    fresh_journal(url)
    with db.connection(url) as conn:
        journal = Journal(conn)
        for i in range(runs):
            journal.create_run(f"drain{workers}-{i}")  # new keys: the cloud remembers old ones
    settings = Settings(
        database_url=url, cloud_url=cloud_url, model_url=model_url, poll=0.05, max_workers=workers
    )
    supervisor = Supervisor(url, settings)
    start = time.perf_counter()
    supervisor.drain()
    elapsed = time.perf_counter() - start
    supervisor.shutdown()
    with db.connection(url) as conn:
        done = conn.execute("SELECT count(*) AS n FROM runs WHERE status = 'done'").fetchone()
        if done is None or done["n"] != runs:
            rows = conn.execute(
                "SELECT status, count(*) AS n, min(failure) AS failure FROM runs GROUP BY 1"
            ).fetchall()
            raise SystemExit(f"only {done} of {runs} runs finished after {elapsed:.1f}s: {rows}")
    return runs / elapsed


def _started(seen: list[tuple[float, str, int]], run_id: str, times: int) -> bool:
    """Whether the supervisor has started ``times`` workers on ``run_id`` (or more)."""
    return sum(s[1] == run_id for s in seen) >= times


def heal_latency(url: str, cloud_url: str, model_url: str, kills: int) -> list[float]:
    fresh_journal(url)
    env = {**os.environ, "DATABASE_URL": url, "CLOUD_URL": cloud_url, "MODEL_URL": model_url}
    sup = subprocess.Popen(
        [sys.executable, "-m", "agent_runtime.supervisor", "--poll", "3"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    seen: list[tuple[float, str, int]] = []
    ready = threading.Condition()

    def read() -> None:
        assert sup.stdout is not None
        for line in sup.stdout:
            m = RESUMING.search(line)
            if m:
                with ready:
                    seen.append((time.perf_counter(), m[1], int(m[2])))
                    ready.notify_all()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    latencies = []
    try:
        with db.connection(url) as conn:
            for i in range(kills):
                run_id = f"heal-{i}"
                Journal(conn).create_run(run_id)
                with ready:  # the supervisor polls every 3 s: wait for its first worker
                    ready.wait_for(functools.partial(_started, seen, run_id, 1), timeout=30)
                    pid = next(s[2] for s in seen if s[1] == run_id)
                time.sleep(0.05)  # let the worker get into its (slow) model call
                killed = time.perf_counter()
                os.kill(pid, signal.SIGKILL)
                with ready:
                    ready.wait_for(functools.partial(_started, seen, run_id, 2), timeout=30)
                    again = [s[0] for s in seen if s[1] == run_id][1]
                latencies.append(again - killed)
    finally:
        sup.send_signal(signal.SIGTERM)
        sup.wait(timeout=30)
        reader.join(timeout=5)
        if sup.stdout is not None:
            sup.stdout.close()
    return latencies


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--kills", type=int, default=10)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4])
    args = parser.parse_args()
    logging.disable(logging.INFO)
    with database() as url, scratch() as state:
        mocks = start_mocks(state, persist_model=False)
        try:
            for workers in args.workers:
                rate = drain(url, mocks.cloud_url, mocks.model_url, args.runs, workers)
                print(
                    f"drain {args.runs} runs, max-workers {workers}: "
                    f"{args.runs / rate:6.1f}s ({rate:6.1f} runs/s)",
                    flush=True,
                )
            mocks.set_model_faults(latency=2.0)
            lat = heal_latency(url, mocks.cloud_url, mocks.model_url, args.kills)
            print(
                f"SIGKILL -> successor started: median {statistics.median(lat) * 1000:.1f} ms, "
                f"max {max(lat) * 1000:.1f} ms over {len(lat)} kills"
            )
        finally:
            mocks.stop()


if __name__ == "__main__":
    main()
