"""How fast one supervisor drains abandoned runs, and how fast it heals a killed worker.

    python bench/bench_supervisor.py [--runs 1000] [--kills 10] [--workers 4 ...]
                                     [--modes pool fork] [--rounds 2] [--relaxed]

1. Drain: ``--runs`` runs abandoned before any supervisor started (created, never
   claimed) are drained by one supervisor with ``--max-workers`` N, once per spawn mode
   and round, the modes alternating: ``pool`` (long-lived workers that take run after
   run, the default) and ``fork`` (a fresh fork per run: the figure before issue 14).
   The mocks have no injected latency and are served **in-process in each worker**
   (socket-free transports, ``worker_transports``): the cloud on a SQLite file of its
   own per worker process on tmpfs (synchronous OFF), the model in memory. So the
   figure is the runtime's and PostgreSQL's, not a web server's. Prints runs/s per mode and round,
   and the CPU each run cost the workers, the supervisor and the PostgreSQL server
   (read from ``/proc``; the server's only when it runs on this machine).
   ``--relaxed`` drains once more with ``synchronous_commit=off`` on every connection:
   what the CPU allows when no commit waits for the disk (not a durable figure).
2. Heal: a worker 0.3 s into a model call (the mocks under uvicorn, the model slowed to
   1 s) is SIGKILLed; per mode, ``--kills`` times, one run at a time (each finishes
   before the next is created), the time from the kill until the
   supervisor hands the run to a process (``resuming``) and until that process has
   adopted the lease (``adopted``: it is working on the run again).
Not a test.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import logging
import os
import re
import resource
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _setup import database, fresh_journal, print_settings, scratch, server_settings
from agent_runtime.config import Settings
from agent_runtime.store import db
from agent_runtime.store.journal import Journal
from agent_runtime.supervisor.main import Supervisor
from mock_remotes import Cloud, Model, cloud_transport, model_transport, start_mocks

EVENT = re.compile(r"(resuming|adopted|done) run=(\S+) (?:pid=(\d+))?")
MODES = ("pool", "fork")


def in_process_remotes(state: Path) -> Mapping[str, httpx.BaseTransport]:
    """Made in each worker process: the model in memory, the cloud on a file of its own
    (one shared file would make the workers queue on SQLite's lock, whose busy handler
    sleeps), written without SQLite's fsyncs: the mock's durability is not measured (a
    process crash still keeps what it wrote)."""
    cloud = Cloud(state / f"cloud-{os.getpid()}.sqlite3", synchronous="OFF")
    return {"model": model_transport(Model()), "cloud": cloud_transport(cloud)}


def _proc_cpu(pid: int, *, reaped: bool = False) -> float:
    """CPU seconds of process ``pid`` (``reaped``: and of its children it has waited for)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return 0.0
    ticks = int(fields[11]) + int(fields[12])  # utime, stime
    if reaped:
        ticks += int(fields[13]) + int(fields[14])  # cutime, cstime
    return ticks / os.sysconf("SC_CLK_TCK")


def server_cpu(url: str) -> float | None:
    """CPU seconds the PostgreSQL server has used so far, its ended backends included
    (None: not a server on this machine, or not readable)."""
    data = server_settings(url).get("data_directory")
    try:
        postmaster = int(Path(data or "", "postmaster.pid").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    total = _proc_cpu(postmaster, reaped=True)
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            ppid = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if ppid == postmaster:
            total += _proc_cpu(int(stat.parent.name))
    return total


def _own_cpu() -> tuple[float, float]:
    """(this process's CPU seconds, its reaped children's)."""
    me, kids = (
        resource.getrusage(resource.RUSAGE_SELF),
        resource.getrusage(resource.RUSAGE_CHILDREN),
    )
    return me.ru_utime + me.ru_stime, kids.ru_utime + kids.ru_stime


@dataclass(frozen=True, kw_only=True)
class Drained:
    rate: float  # runs/s
    supervisor_ms: float  # CPU per run: the supervisor (this process)
    workers_ms: float  # the worker processes
    server_ms: float | None  # the PostgreSQL server (None: not measurable from here)


def drain(url: str, state: Path, mode: str, runs: int, workers: int, tag: str) -> Drained:
    fresh_journal(url)
    with db.connection(url) as conn:
        journal = Journal(conn)
        for i in range(runs):
            journal.create_run(f"drain-{tag}-{i}")  # new keys: the cloud remembers old ones
    settings = Settings(database_url=url, poll=0.05, max_workers=workers)
    supervisor = Supervisor(
        url,
        settings,
        spawn=mode,
        worker_transports=functools.partial(in_process_remotes, state),
    )
    server_before, (me_before, kids_before) = server_cpu(url), _own_cpu()
    start = time.perf_counter()
    try:
        supervisor.drain()
        elapsed = time.perf_counter() - start
    finally:
        supervisor.shutdown()  # waits for every worker: their CPU is counted
    server_after, (me_after, kids_after) = server_cpu(url), _own_cpu()
    with db.connection(url) as conn:
        done = conn.execute("SELECT count(*) AS n FROM runs WHERE status = 'done'").fetchone()
        if done is None or done["n"] != runs:
            rows = conn.execute(
                "SELECT status, count(*) AS n, min(failure) AS failure FROM runs GROUP BY 1"
            ).fetchall()
            raise SystemExit(f"only {done} of {runs} runs finished after {elapsed:.1f}s: {rows}")
    server = None
    if server_before is not None and server_after is not None:
        server = (server_after - server_before) / runs * 1000
    return Drained(
        rate=runs / elapsed,
        supervisor_ms=(me_after - me_before) / runs * 1000,
        workers_ms=(kids_after - kids_before) / runs * 1000,
        server_ms=server,
    )


def _seen(events: list[tuple[float, str, str, int]], kind: str, run_id: str, n: int) -> bool:
    """Whether ``kind`` happened to ``run_id`` ``n`` times (or more)."""
    return sum(e[1] == kind and e[2] == run_id for e in events) >= n


def _nth(events: list[tuple[float, str, str, int]], kind: str, run_id: str, n: int) -> float:
    return [e[0] for e in events if e[1] == kind and e[2] == run_id][n - 1]


def heal_latency(
    url: str, cloud_url: str, model_url: str, mode: str, kills: int
) -> tuple[list[float], list[float]]:
    """(kill -> successor started, kill -> lease adopted again), in seconds, per kill."""
    fresh_journal(url)
    env = {**os.environ, "DATABASE_URL": url, "CLOUD_URL": cloud_url, "MODEL_URL": model_url}
    sup = subprocess.Popen(
        [sys.executable, "-m", "agent_runtime.supervisor", "--poll", "3", "--spawn", mode],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    events: list[tuple[float, str, str, int]] = []
    ready = threading.Condition()

    def read() -> None:
        assert sup.stdout is not None
        for line in sup.stdout:
            m = EVENT.search(line)
            if m:
                with ready:
                    events.append((time.perf_counter(), m[1], m[2], int(m[3] or 0)))
                    ready.notify_all()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    started, adopted = [], []
    try:
        with db.connection(url) as conn:
            for i in range(kills):
                run_id = f"heal-{mode}-{i}"
                Journal(conn).create_run(run_id)
                with ready:  # the supervisor polls every 3 s: wait for its first worker
                    ready.wait_for(functools.partial(_seen, events, "adopted", run_id, 1), 30)
                    pid = next(e[3] for e in events if e[1] == "resuming" and e[2] == run_id)
                time.sleep(0.3)  # into its 1 s model call (and the pool's spare is open)
                killed = time.perf_counter()
                os.kill(pid, signal.SIGKILL)
                with ready:
                    ready.wait_for(functools.partial(_seen, events, "adopted", run_id, 2), 30)
                    # one run at a time: every kill meets the same steady state
                    ready.wait_for(functools.partial(_seen, events, "done", run_id, 1), 60)
                started.append(_nth(events, "resuming", run_id, 2) - killed)
                adopted.append(_nth(events, "adopted", run_id, 2) - killed)
    finally:
        sup.send_signal(signal.SIGTERM)
        sup.wait(timeout=30)
        reader.join(timeout=5)
        if sup.stdout is not None:
            sup.stdout.close()
    return started, adopted


def drain_modes(
    url: str, state: Path, modes: list[str], runs: int, workers: int, rounds: int, label: str
) -> None:
    """Drain ``runs`` runs ``rounds`` times per mode, the modes alternating; print it all."""
    rates: dict[str, list[float]] = {mode: [] for mode in modes}
    for r in range(rounds):
        for mode in modes if r % 2 == 0 else reversed(modes):
            got = drain(url, state, mode, runs, workers, f"{label}{mode}{workers}-{r}")
            rates[mode].append(got.rate)
            server = f"{got.server_ms:5.1f}" if got.server_ms is not None else "    ?"
            print(
                f"drain{label} {runs} runs, {mode:4}, max-workers {workers}, round {r + 1}: "
                f"{runs / got.rate:6.2f}s ({got.rate:6.1f} runs/s); CPU ms/run: "
                f"workers {got.workers_ms:5.1f}, supervisor {got.supervisor_ms:4.1f}, "
                f"server {server}",
                flush=True,
            )
    for mode, each in rates.items():
        median = statistics.median(each)
        print(f"drain{label} {mode:4}, max-workers {workers}: median {median:6.1f} runs/s")
    if "pool" in rates and "fork" in rates:
        ratio = statistics.median(rates["pool"]) / statistics.median(rates["fork"])
        print(f"drain{label} pool/fork, max-workers {workers}: {ratio:.1f}x")


@contextlib.contextmanager
def relaxed_commits() -> Iterator[None]:
    """Every connection made meanwhile (the supervisor's, its workers') commits without
    waiting for the WAL flush: libpq reads ``PGOPTIONS`` when it connects."""
    before = os.environ.get("PGOPTIONS")
    os.environ["PGOPTIONS"] = f"{before or ''} -c synchronous_commit=off".strip()
    try:
        yield
    finally:
        if before is None:
            del os.environ["PGOPTIONS"]
        else:
            os.environ["PGOPTIONS"] = before


def _ms(values: list[float]) -> str:
    return f"median {statistics.median(values) * 1000:5.1f} ms, max {max(values) * 1000:5.1f} ms"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--kills", type=int, default=10)
    parser.add_argument("--workers", type=int, nargs="+", default=[4])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument(
        "--relaxed",
        action="store_true",
        help="drain once more with synchronous_commit=off: what the CPU allows (not durable)",
    )
    parser.add_argument("--modes", nargs="+", choices=MODES, default=list(MODES))
    args = parser.parse_args()
    logging.disable(logging.INFO)
    with database() as url, scratch() as state:
        print_settings(url)
        print(f"cpus: {os.cpu_count()}; mocks in-process in each worker, zero latency")
        for workers in args.workers:
            drain_modes(url, state, args.modes, args.runs, workers, args.rounds, "")
        if args.relaxed:
            print("relaxed: synchronous_commit=off, no commit waits for the flush (not durable)")
            with relaxed_commits():
                for workers in args.workers:
                    drain_modes(url, state, args.modes, args.runs, workers, args.rounds, "*")
        if args.kills <= 0:
            return
        logging.disable(logging.NOTSET)
        mocks = start_mocks(state / "served", persist_model=False)
        try:
            mocks.set_model_faults(latency=1.0)
            for mode in args.modes:
                started, adopted = heal_latency(
                    url, mocks.cloud_url, mocks.model_url, mode, args.kills
                )
                print(f"heal {mode:4}: SIGKILL -> successor started: {_ms(started)}")
                print(f"heal {mode:4}: SIGKILL -> lease adopted again: {_ms(adopted)}")
        finally:
            mocks.stop()


if __name__ == "__main__":
    main()
