"""A journal of a million runs: are the operator's reads and the supervisor's claims flat?

    python bench/bench_scale.py [--sizes 10000 100000 1000000] [--steps 3] [--reps 9]
                                [--live 100] [--shared-buffers 2GB]

It fills one database per size (``scale_<size>``, on the same server) by SQL
(``bench/sql/scale.sql``: ``generate_series``, about two minutes per million): a history of
that many final runs (3% failed, 2% cancelled, the rest done; ``--steps`` confirmed steps
each, one claim each), a backlog of as many pending runs nobody has claimed yet, and the
same ``--live`` runs in flight at every size (running under a live lease with a call in
doubt, parked on one, exhausted); then VACUUM ANALYZE, as autovacuum would. It times each
operation ``--reps`` times *interleaved* (one call at each size in turn, in a shuffled
order each round, so the shared machine's load moves every size alike) after one
unmeasured call at each, and prints per size the median in milliseconds, the ratio of
the largest size to the first, and the pages the operation touched (shared buffers hit
or read, ``pg_stat_database``: the cost the index paths decide, which no load moves):

- the operator's reads, through the functions the CLI calls: ``runs`` (the first page of
  100, the next page by ``--after``, each ``--status``, ``--in-doubt``) and ``show RUN`` (a
  finished run, and a live one);
- the supervisor's: ``give_up_exhausted``, ``claim_expired`` (a sweep's claim of 4 runs),
  ``unserved_runs`` (its look for runs of other agents), ``claim_run`` of one pending run,
  and a ``prune_batch`` of 500 runs: each in a transaction rolled back, so the journal
  stays as it was.

The rule (issue 24): the largest size within 1.5x of the first, for every row. Figures,
never pass/fail: the machine is shared, quote ratios and run it twice.
"""

from __future__ import annotations

import argparse
import functools
import random
import statistics
import sys
import time
from collections.abc import Callable, Mapping
from contextlib import ExitStack
from pathlib import Path

import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _setup import QUERIES, database, other_database
from agent_runtime.operator.cursor import Cursor
from agent_runtime.operator.snapshot import STATUSES, list_runs, read_history
from agent_runtime.store import db

RULE = 1.5  # the largest size's median over the first's, at most
PAGE = 100  # runs per page: the CLI's default --limit


def _pages(conn: db.Connection) -> int:
    conn.execute("SELECT pg_stat_force_next_flush()")
    row = conn.execute(
        "SELECT blks_hit + blks_read AS n FROM pg_stat_database WHERE datname = current_database()"
    ).fetchone()
    assert row is not None
    return int(row["n"])


def _pages_of(conn: db.Connection, fn: Callable[[], object]) -> int:
    """Pages one call touches, net of the reading itself."""
    _pages(conn)  # the first reading of a connection loads catalogs of its own
    base = _pages(conn)
    idle = _pages(conn) - base
    before = _pages(conn)
    fn()
    return _pages(conn) - before - idle


def _rolled_back(
    conn: db.Connection, name: str, params: Callable[[], Mapping[str, object]]
) -> Callable[[], None]:
    def run() -> None:
        conn.execute("BEGIN")
        try:
            db.run(conn, name, params())
        finally:
            conn.execute("ROLLBACK")

    return run


def operations(conn: db.Connection, size: int) -> dict[str, Callable[[], object]]:
    first = list_runs(conn, limit=PAGE)
    assert first.next is not None
    after = Cursor.decode(first.next)
    ops: dict[str, Callable[[], object]] = {
        "SELECT 1 (the machine)": lambda: conn.execute("SELECT 1").fetchall(),
        "runs": lambda: list_runs(conn, limit=PAGE),
        "runs --after (page 2)": lambda: list_runs(conn, limit=PAGE, after=after),
        **{
            f"runs --status {s}": functools.partial(list_runs, conn, statuses=[s], limit=PAGE)
            for s in STATUSES
        },
        "runs --in-doubt": lambda: list_runs(conn, in_doubt=True, limit=PAGE),
        "show (a finished run)": lambda: read_history(conn, f"h-{size // 2}"),
        "show (a live run)": lambda: read_history(conn, "live-1-1"),
    }
    limits: dict[str, object] = {"max_attempts": 10, "give_up_after": 600.0}
    claim = {"owner": "bench", "lease": 30.0, "limit": 4, "max_attempts": 10}
    one = {"owner": "bench", "lease": 30.0, "dead_owner": None, "dead_generation": None}
    ops.update(
        {
            "give_up_exhausted": _rolled_back(conn, "give_up_exhausted", lambda: limits),
            "claim_expired (4)": _rolled_back(
                conn, "claim_expired", lambda: {**claim, "agents": ["provisioning"]}
            ),
            "unserved_runs": _rolled_back(
                conn,
                "unserved_runs",
                lambda: {"agents": ["provisioning"], "after": 6.0, "limit": 100},
            ),
            "claim_run (one)": _rolled_back(
                conn,
                "claim_run",
                lambda: {**one, "run": f"p-{random.randint(1, size)}", "forced": False},
            ),
            "prune_batch (500)": _rolled_back(
                conn, "prune_batch", lambda: {"status": "done", "age": 86400.0, "batch": 500}
            ),
        }
    )
    return ops


def fill(conn: db.Connection, size: int, steps: int, live: int) -> None:
    db.ensure_schema(conn)
    db.run(conn, "delete_all_runs")
    conn.execute("UPDATE cr_clock SET skew = interval '0', frozen_at = NULL")
    conn.execute(QUERIES["scale_live"], {"n": live})
    chunk = 100_000  # runs per statement: a statement's memory stays small
    for first in range(1, size + 1, chunk):
        params = {"first": first, "last": min(size, first + chunk - 1), "steps": steps}
        conn.execute(QUERIES["scale_history"], params)
        conn.execute(QUERIES["scale_backlog"], params)
    conn.execute("VACUUM ANALYZE")


def _database(url: str, size: int) -> str:
    name = f"scale_{size}"
    with db.connection(other_database(url)) as admin:
        admin.execute(
            psycopg.sql.SQL("DROP DATABASE IF EXISTS {}").format(psycopg.sql.Identifier(name))
        )
        admin.execute(psycopg.sql.SQL("CREATE DATABASE {}").format(psycopg.sql.Identifier(name)))
    return other_database(url, name)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--reps", type=int, default=21)
    parser.add_argument("--live", type=int, default=100)
    parser.add_argument(
        "--shared-buffers",
        default=None,
        help="the throwaway cluster's shared_buffers (e.g. 2GB: the largest journal's working "
        "set in PostgreSQL's own cache; default: the local cluster's)",
    )
    args = parser.parse_args()
    sizes = sorted(args.sizes)
    extra = {"shared_buffers": args.shared_buffers} if args.shared_buffers else None
    with database(extra) as url, ExitStack() as stack:
        conns: dict[int, db.Connection] = {}
        for size in sizes:
            conns[size] = stack.enter_context(db.connection(_database(url, size)))
            began = time.perf_counter()
            fill(conns[size], size, args.steps, args.live)
            row = conns[size].execute(QUERIES["scale_sizes"]).fetchone()
            assert row is not None
            print(
                f"size {size:>9,}: {row['runs']:,} runs, {row['size']}, filled in "
                f"{time.perf_counter() - began:.0f} s",
                flush=True,
            )
        ops = {size: operations(conns[size], size) for size in sizes}
        times: dict[str, dict[int, list[float]]] = {}
        pages: dict[str, dict[int, int]] = {}
        for name in ops[sizes[0]]:
            times[name] = {size: [] for size in sizes}
            for size in sizes:
                ops[size][name]()  # unmeasured: plans, catalogs, caches
            pages[name] = {size: _pages_of(conns[size], ops[size][name]) for size in sizes}
            order = list(sizes)
            shuffle = random.Random(name).shuffle
            for _ in range(args.reps):
                shuffle(order)  # no size always first or last after another's call
                for size in order:
                    fn = ops[size][name]
                    start = time.perf_counter()
                    fn()
                    times[name][size].append((time.perf_counter() - start) * 1000)
        _report(times, pages, sizes)


def _report(
    times: dict[str, dict[int, list[float]]], pages: dict[str, dict[int, int]], sizes: list[int]
) -> None:
    head = "".join(f"{s:>11,}" for s in sizes)
    pages_head = "".join(f"{s:>9,}" for s in sizes)
    print("\nmedian ms per operation by history size (+ as many pending runs); pages touched\n")
    print(f"{'operation':<26}{head}{'ratio':>7}  rule |{pages_head}")
    worst = 0.0
    for name, by_size in times.items():
        row = [statistics.median(by_size[s]) for s in sizes]
        ratio = row[-1] / row[0]
        worst = max(worst, ratio) if not name.startswith("SELECT 1") else worst
        cells = "".join(f"{v:11.2f}" for v in row)
        touched = "".join(f"{pages[name][s]:9d}" for s in sizes)
        verdict = "ok" if ratio <= RULE else "OVER"
        print(f"{name:<26}{cells}{ratio:7.2f}  {verdict:<4} |{touched}")
    print(f"\nworst ratio {worst:.2f} (rule: every row within {RULE}x of the first size)")


if __name__ == "__main__":
    main()
