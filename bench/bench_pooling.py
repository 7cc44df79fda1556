"""What a statement costs behind PgBouncer: the runtime's reads with prepared statements
(a direct connection), without (what a pooled connection does), and through PgBouncer in
transaction mode.

    python -m bench.bench_pooling [--rounds N]

Needs Debian's ``pgbouncer`` (see tests/fix_pgbouncer.py, which starts it). Prints the
median microseconds per statement of each way and its ratio to the prepared one: the
machine is shared, so only the ratios of one run mean anything.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

from bench._setup import database, fresh_journal

from agent_runtime.store import db
from agent_runtime.store.journal import Journal
from tests.fix_pgbouncer import pgbouncer

STATEMENTS = ("get_run", "load_history", "load_tool_calls")  # what a (re)start reads
RUN = "bench-pooling"


def _timer(conn: db.Connection) -> Callable[[], float]:
    def once() -> float:
        start = time.perf_counter()
        for name in STATEMENTS:
            db.run(conn, name, {"run": RUN})
        return (time.perf_counter() - start) / len(STATEMENTS)

    return once


def measure(ways: dict[str, db.Connection], rounds: int) -> dict[str, float]:
    timers = {name: _timer(conn) for name, conn in ways.items()}
    for timer in timers.values():  # warm: the first round prepares, where it prepares
        timer()
    samples: dict[str, list[float]] = {name: [] for name in ways}
    for _ in range(rounds):  # interleaved, so a noisy moment hits every way alike
        for name, timer in timers.items():
            samples[name].append(timer())
    return {name: statistics.median(s) * 1e6 for name, s in samples.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2000)
    args = parser.parse_args()
    with database() as url:
        fresh_journal(url)
        with db.connection(url) as conn:
            Journal(conn).create_run(RUN)
        with pgbouncer(url, "transaction") as bouncer:
            prepared = db.connect(url)
            unprepared = db.connect(url)
            unprepared.prepare_threshold = None
            pooled = db.connect(bouncer.url)
            ways = {"prepared": prepared, "unprepared": unprepared, "pgbouncer": pooled}
            try:
                medians = measure(ways, args.rounds)
            finally:
                for conn in ways.values():
                    conn.close()
    base = medians["prepared"]
    print(f"{'way':<12} {'us/statement':>13} {'ratio':>7}")
    for name, value in medians.items():
        print(f"{name:<12} {value:>13.1f} {value / base:>7.2f}")


if __name__ == "__main__":
    main()
