"""The marginal cost of one journaled step, as a ratio to one raw durable commit.

    python bench/bench_step.py [--steps 50] [--runs 3] [--reps 7] [--commits 100]
                               [--local-tool] [--no-dbos]

What it compares, on one PostgreSQL server with fsync and synchronous_commit on:

- **a journaled step**: runs of ``--steps`` tool steps minus runs of 0 steps (the run's
  fixed costs -- create, claim, history read, the final answer, finish -- cancel),
  divided by ``--steps``. One worker (``Worker.build`` on a connection of its own) drives
  the bench agent of ``bench/_loop.py``: its model speaks Chat Completions in-process, its
  one tool is ``keyed`` and goes to the mock cloud's in-process transport (``--local-tool``:
  a ``read`` tool that calls nothing). A step is the whole of it: the ownership check,
  the model call, the decision, the intent, the tool call, the confirm;
- **the journal only** (``bench/_floor.py``): the same four journal writes per step through
  the runtime's ``Journal``, rows of the same size, on one connection, and nothing else (no
  HTTP, no model, no tool, no worker): the floor under any step of this protocol here;
- **a raw commit**: one single-row INSERT into a table with a primary key, autocommit,
  prepared, on a connection of its own; ``--commits`` in a row, their mean.

With ``dbos`` installed, DBOS Transact's trivial step too (``bench/_dbos.py``: a workflow
of ``--steps`` steps minus one of none), launched in this process on the same server.

They alternate: raw commits, our steps, raw commits, the journal's, raw commits, DBOS's
steps, raw commits, ...; each block's ratio is its step cost over the mean of the raw
commits timed just before and just after it, so a disk whose flush latency drifts (a
shared machine's does, by 10x within a minute) moves both sides of a ratio alike. It
prints every rep (raw commit ms, step ms, ratio), the median ratios side by side, and
what a step costs the server: transactions, WAL fsyncs, WAL records and bytes
(``bench/_wal.py``), next to a raw commit's.

Figures, never pass/fail: the machine is shared, so run it twice.
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _floor import JournalSteps
from _loop import LoopRuns
from _setup import database, database_name, fresh_journal, print_settings, scratch
from _wal import Counters, Meter, RawCommit

# Seconds an idle PostgreSQL 15 backend may wait before it publishes pending statistics
# (PGSTAT_IDLE_INTERVAL is 10 s): DBOS's pooled connections cannot be told to flush.
STATS_IDLE = 10.5


@dataclass(frozen=True, kw_only=True)
class Sample:
    """One run: wall and CPU seconds, seconds inside the mocks, what the server did."""

    wall: float
    cpu: float
    mocks: float = 0.0
    counters: Counters | None = None


@dataclass(frozen=True, kw_only=True)
class Block:
    """Per step, from one block of long and empty runs."""

    step: float  # seconds: (median long run - median empty run) / steps
    cpu: float  # client CPU seconds (the in-process mocks' included)
    mocks: float  # seconds inside the in-process mocks
    counters: Counters | None


def per_step(long: list[Sample], empty: list[Sample], steps: int) -> Block:
    def median(of: Callable[[Sample], float]) -> float:
        return (statistics.median(map(of, long)) - statistics.median(map(of, empty))) / steps

    counters = None
    if all(s.counters is not None for s in long + empty):
        high = Counters.mean([s.counters for s in long if s.counters is not None])
        low = Counters.mean([s.counters for s in empty if s.counters is not None])
        counters = (high - low).per(steps)
    return Block(
        step=median(lambda s: s.wall),
        cpu=median(lambda s: s.cpu),
        mocks=median(lambda s: s.mocks),
        counters=counters,
    )


def orders(steps: int, pairs: int) -> list[int]:
    """Long and empty runs, alternating which comes first: N 0 0 N N 0 ..."""
    out: list[int] = []
    for i in range(pairs):
        out += [steps, 0] if i % 2 == 0 else [0, steps]
    return out


def our_block(runs: LoopRuns, meter: Meter, steps: int, pairs: int, tag: str) -> Block:
    long: list[Sample] = []
    empty: list[Sample] = []
    for i, n in enumerate(orders(steps, pairs)):
        before = meter.read([runs.conn])
        mocks = runs.mock_seconds
        cpu, wall = time.process_time(), time.perf_counter()
        runs.run(f"{tag}-{i}-{n}", n)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        sample = Sample(
            wall=wall,
            cpu=cpu,
            mocks=runs.mock_seconds - mocks,
            counters=meter.read([runs.conn]) - before,
        )
        (long if n else empty).append(sample)
    return per_step(long, empty, steps)


def timed_block(run: Callable[[int], None], steps: int, pairs: int) -> Block:
    long: list[Sample] = []
    empty: list[Sample] = []
    for n in orders(steps, pairs):
        cpu, wall = time.process_time(), time.perf_counter()
        run(n)
        sample = Sample(wall=time.perf_counter() - wall, cpu=time.process_time() - cpu)
        (long if n else empty).append(sample)
    return per_step(long, empty, steps)


@dataclass(frozen=True, kw_only=True)
class Rep:
    raw: float  # seconds per raw commit: the mean of the blocks before and after
    block: Block

    @property
    def ratio(self) -> float:
        return self.block.step / self.raw


Subject = tuple[str, Callable[[int], Block]]  # a name, and its step block of rep i


def alternate(subjects: list[Subject], raw: RawCommit, reps: int, commits: int) -> list[list[Rep]]:
    """raw commits, then each subject's block followed by raw commits, ``reps`` times;
    per subject its :class:`Rep` of every round."""
    print("\nraw commit block, step block, raw commit block, ...")
    done: list[list[Rep]] = [[] for _ in subjects]
    before = raw.block(commits)
    for i in range(reps):
        for (name, block), into in zip(subjects, done, strict=True):
            measured = block(i)
            after = raw.block(commits)
            rep = Rep(raw=(before + after) / 2, block=measured)
            into.append(rep)
            extra = f"  (mocks {measured.mocks * 1e3:.3f} ms)" if measured.mocks else ""
            print(
                f"  rep {i + 1} {name:<12} raw commit {rep.raw * 1e3:6.3f} ms  step "
                f"{measured.step * 1e3:6.3f} ms  ratio {rep.ratio:5.2f}x  "
                f"client CPU {measured.cpu * 1e3:.3f} ms{extra}"
            )
            before = after
    return done


def median_ratio(reps: list[Rep]) -> float:
    return statistics.median(r.ratio for r in reps)


def summary(name: str, reps: list[Rep]) -> str:
    ratios = [r.ratio for r in reps]
    step = statistics.median(r.block.step for r in reps)
    raw = statistics.median(r.raw for r in reps)
    return (
        f"{name}: median ratio {median_ratio(reps):.2f}x one raw commit "
        f"(reps {min(ratios):.2f}-{max(ratios):.2f}x); step {step * 1e3:.3f} ms, "
        f"raw commit {raw * 1e3:.3f} ms (medians)"
    )


def our_summary(reps: list[Rep]) -> str:
    mocks = statistics.median(r.block.mocks for r in reps)
    without = statistics.median((r.block.step - r.block.mocks) / r.raw for r in reps)
    cpu = statistics.median(r.block.cpu for r in reps)
    counted = Counters.mean([r.block.counters for r in reps if r.block.counters is not None])
    beyond = statistics.median(r.block.step - counted.syncs * r.raw for r in reps)
    return "\n".join(
        [
            summary("crashresume", reps),
            f"  of a step: {mocks * 1e3:.3f} ms inside the in-process mocks (ratio without "
            f"them {without:.2f}x); client CPU {cpu * 1e3:.3f} ms (mocks included); "
            f"{beyond * 1e3:.3f} ms beyond {counted.syncs:.2f} raw commits (one per fsync: "
            "what the disk's flush latency does not explain)",
            f"  per step:   {counted.line()}",
        ]
    )


def floor_summary(ours: list[Rep], floor: list[Rep]) -> list[str]:
    """The journal's writes alone (``bench/_floor.py``) beside the whole step."""
    pairs = zip(ours, floor, strict=True)
    beyond = statistics.median(a.block.step - b.block.step for a, b in pairs)
    cpu = statistics.median(r.block.cpu for r in floor)
    return [
        summary("journal only", floor),
        f"  the four journal writes of a step and nothing else (the floor under any step "
        f"here); client CPU {cpu * 1e3:.3f} ms; a whole step costs {beyond * 1e3:.3f} ms more "
        "(the model's and the tool's exchanges, the mocks, the worker)",
    ]


def dbos_counters(run: Callable[[int], None], meter: Meter, steps: int, runs: int) -> Counters:
    """What a DBOS step costs the server: ``runs`` long workflows minus as many empty
    ones, each group read after DBOS's connections idled long enough to publish their
    statistics (its background threads' reads in those waits cancel out)."""
    time.sleep(STATS_IDLE)
    start = meter.read()
    for _ in range(runs):
        run(steps)
    time.sleep(STATS_IDLE)
    middle = meter.read()
    for _ in range(runs):
        run(0)
    time.sleep(STATS_IDLE)
    end = meter.read()
    return ((middle - start) - (end - middle)).per(runs * steps)


def run_all(args: argparse.Namespace, url: str, state: Path) -> list[str]:
    """Every subject, alternating with raw commits; the summary lines."""
    meter = Meter(url, database_name(url))
    raw = RawCommit(url)
    runs = LoopRuns(url, state, remote=not args.local_tool)
    floor = JournalSteps(url)
    dbos = None
    try:
        our_block(runs, meter, args.steps, 1, "warm")  # prepared statements, caches
        floor.run(args.steps)
        subjects: list[Subject] = [
            ("crashresume", lambda i: our_block(runs, meter, args.steps, args.runs, f"r{i}")),
            ("journal only", lambda i: timed_block(floor.run, args.steps, args.runs)),
        ]
        if args.no_dbos:
            pass
        elif importlib.util.find_spec("dbos") is None:
            print("dbos: not installed, no comparison (pip install -e '.[bench]')")
        else:
            import _dbos

            dbos = _dbos.DbosSteps(url)
            dbos.run(args.steps)  # warm
            print(f"DBOS {_dbos.version()}: launched, system database {_dbos.DATABASE!r}")
            run = dbos.run
            subjects.append(("DBOS", lambda i: timed_block(run, args.steps, args.runs)))
        tool = "a read tool, no remote" if args.local_tool else "a keyed tool, the mock cloud"
        print(f"crashresume: {args.steps}-step runs minus 0-step runs, {tool}")
        reps = alternate(subjects, raw, args.reps, args.commits)
        lines = [our_summary(reps[0])]
        lines.append(f"  raw commit: {raw.counted(meter, args.commits).line()}")
        lines += floor_summary(reps[0], reps[1])
        side = [f"crashresume {median_ratio(reps[0]):.2f}x"]
        if dbos is not None:
            name = f"DBOS {_dbos.version()}"
            print(f"\ncounting what a DBOS step costs the server ({3 * STATS_IDLE:.0f} s idle)")
            dbos_meter = Meter(url, _dbos.DATABASE)
            try:
                counted = dbos_counters(dbos.run, dbos_meter, args.steps, args.runs)
            finally:
                dbos_meter.close()
            lines += [
                summary(name, reps[2]),
                f"  per step:   {counted.line()}",
                f"  (read after {STATS_IDLE} s idle: DBOS's pooled connections publish their "
                "statistics only then)",
            ]
            side.append(f"{name} {median_ratio(reps[2]):.2f}x")
        lines.append(f"side by side, median ratio to one raw durable commit: {', '.join(side)}")
        return lines
    finally:
        if dbos is not None:
            dbos.close()
        runs.close()
        floor.close()
        raw.close()
        meter.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=50, help="tool steps of a long run")
    parser.add_argument("--runs", type=int, default=3, help="long and empty runs per block")
    parser.add_argument("--reps", type=int, default=7, help="step blocks (each between raws)")
    parser.add_argument("--commits", type=int, default=100, help="raw commits per raw block")
    parser.add_argument("--local-tool", action="store_true", help="a read tool, no remote")
    parser.add_argument("--no-dbos", action="store_true", help="skip the DBOS comparison")
    args = parser.parse_args()
    if args.steps < 1 or args.runs < 1 or args.reps < 1 or args.commits < 1:
        parser.error("--steps, --runs, --reps and --commits must be at least 1")
    with database() as url, scratch() as state:
        print_settings(url)
        fresh_journal(url)
        lines = run_all(args, url, state)
    print("\n" + "\n".join(lines))


if __name__ == "__main__":
    main()
