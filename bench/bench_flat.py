"""Is a step's cost flat in run length, and what does reading a run's history cost?

    python bench/bench_flat.py [--long 300 1000] [--repeat 3] [--history 3 100 1000]
                               [--reads 20] [--local-tool]

1. **Step cost by position**: one worker drives runs of ``--long`` steps (the bench agent
   of ``bench/_loop.py``, in-process mocks, ``--repeat`` runs of each length). Its model
   notes the wall and CPU clock at every question, so step *k* costs the time from the
   question that started it to the next one: the model call, the decision, the intent,
   the tool call, the confirm. It prints the median of steps 1-10 and of the last ten
   steps, wall and client CPU, and their ratio (1.00 is flat), with a raw durable commit
   timed just before and after the run: the wall figures move with the disk's fsync
   latency, which a shared machine changes from one second to the next.
2. **History read**: ``Journal.history(run_id)`` -- what a restart reads before it acts --
   on runs of ``--history`` journaled steps, the median of ``--reads`` reads, and how
   many statements one read sends (transactions counted by the server, ``bench/_wal.py``).

Figures, never pass/fail: the machine is shared, so run it twice.
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _loop import LoopRuns
from _setup import database, database_name, fresh_journal, print_settings, scratch
from _wal import Meter, RawCommit
from agent_runtime import Journal

FIRST = 10  # steps at each end of a run compared
RAW_COMMITS = 50  # raw commits timed before and after each long run (the disk's state)


def step_costs(runs: LoopRuns, run_id: str, steps: int) -> list[tuple[float, float]]:
    """(wall, CPU) seconds of each step of one new run, in order."""
    runs.model.asked.clear()
    runs.run(run_id, steps)
    asked = runs.model.asked  # one question per step, then the one answered with the text
    return [(b[0] - a[0], b[1] - a[1]) for a, b in itertools.pairwise(asked)]


def flatness(runs: LoopRuns, raw: RawCommit, lengths: list[int], repeat: int) -> None:
    print(
        f"\nstep cost by position (medians of steps 1-{FIRST} and of the last {FIRST}; "
        "a raw commit timed before and after each run)"
    )
    for steps in lengths:
        if steps < 2 * FIRST:
            raise SystemExit(f"--long {steps}: a run needs at least {2 * FIRST} steps")
        growth = []
        for i in range(repeat):
            before = raw.block(RAW_COMMITS)
            costs = step_costs(runs, f"flat-{steps}-{i}", steps)
            after = raw.block(RAW_COMMITS)
            first, last = costs[:FIRST], costs[-FIRST:]
            wall = [statistics.median(c[0] for c in part) for part in (first, last)]
            cpu = [statistics.median(c[1] for c in part) for part in (first, last)]
            growth.append((wall[1] / wall[0], cpu[1] / cpu[0]))
            print(
                f"  {steps:5d}-step run {i + 1}: steps 1-{FIRST} {wall[0] * 1e3:6.3f} ms, "
                f"{steps - FIRST + 1}-{steps} {wall[1] * 1e3:6.3f} ms (x{growth[-1][0]:.2f}); "
                f"client CPU {cpu[0] * 1e3:.3f} -> {cpu[1] * 1e3:.3f} ms "
                f"(x{growth[-1][1]:.2f}); raw commit {before * 1e3:.3f} / {after * 1e3:.3f} ms"
            )
        print(
            f"  {steps:5d} steps, median of {repeat}: wall x"
            f"{statistics.median(g[0] for g in growth):.2f}, client CPU x"
            f"{statistics.median(g[1] for g in growth):.2f} (1.00 is flat)"
        )


def history_reads(runs: LoopRuns, meter: Meter, sizes: list[int], reads: int) -> None:
    print(f"\nhistory read: Journal.history(run_id), median of {reads}")
    journal = Journal(runs.conn)
    for steps in sizes:
        run_id = f"history-{steps}"
        runs.run(run_id, steps)
        history = journal.history(run_id)  # warm: the statements are prepared
        if len(history.calls) != steps:
            raise SystemExit(f"run {run_id} has {len(history.calls)} calls, not {steps}")
        seconds = []
        before = meter.read([runs.conn])
        for _ in range(reads):
            start = time.perf_counter()
            journal.history(run_id)
            seconds.append(time.perf_counter() - start)
        counted = meter.read([runs.conn]) - before
        statements = (counted.xacts - 1) / reads  # one is the statistics flush itself
        print(
            f"  {steps:5d} journaled steps: {statistics.median(seconds) * 1e3:7.3f} ms "
            f"({statements:.1f} statements per read)"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--long", type=int, nargs="+", default=[300, 1000])
    parser.add_argument("--repeat", type=int, default=3, help="runs of each length")
    parser.add_argument("--history", type=int, nargs="+", default=[3, 100, 1000])
    parser.add_argument("--reads", type=int, default=20, help="history reads timed per run")
    parser.add_argument("--local-tool", action="store_true", help="a read tool, no remote")
    args = parser.parse_args()
    if args.repeat < 1 or args.reads < 1 or min(args.history) < 1:
        parser.error("--repeat, --reads and every --history size must be at least 1")
    with database() as url, scratch() as state:
        print_settings(url)
        fresh_journal(url)
        meter = Meter(url, database_name(url))
        raw = RawCommit(url)
        runs = LoopRuns(url, state, remote=not args.local_tool)
        try:
            runs.run("warm", 5)
            flatness(runs, raw, args.long, args.repeat)
            history_reads(runs, meter, args.history, args.reads)
        finally:
            runs.close()
            raw.close()
            meter.close()


if __name__ == "__main__":
    main()
