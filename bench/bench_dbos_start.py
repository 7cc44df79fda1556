"""What a start of the DBOS adapter costs, beside DBOS's own launch, on SQLite and PostgreSQL.

    python bench/bench_dbos_start.py [--starts N]

Per start, best of N: ``dbos launch``, DBOS's own ``launch()`` + ``destroy()`` on a system
database it has migrated already; ``fresh database``, the same on a new empty one (what
every scenario's first start cost the adapter before, DBOS migrating it); ``adapter``, a
``WorkflowSubject`` for a new scenario and its teardown (its database made from the
migrated template, DBOS launched, pending workflows recovered, DBOS shut down, the
PostgreSQL database dropped); ``adapter restart``, a start of a scenario whose database
exists, that dies (nothing made, nothing dropped). The ratios to ``dbos launch`` are the
figures to compare. PostgreSQL is DATABASE_URL or a throwaway local cluster (fsync on, as
bench/_setup makes it). Needs ``pip install -e '.[bench]'``. Prints, asserts nothing.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from dbos import DBOS

from _setup import database
from crashresume import Context, SimulatedCrash
from crashresume._context import ScenarioLog
from crashresume.adapters._dbos_databases import PostgresDatabases, SqliteDatabases
from crashresume.adapters.dbos import DEFAULT_CONFIG, WorkflowSubject

DEFAULT_STARTS = 5


@DBOS.workflow()
def nothing(item: str) -> str:
    return item


def launch(url: str) -> None:
    config: Any = {**DEFAULT_CONFIG, "name": "bench", "system_database_url": url}
    DBOS(config=config)
    try:
        DBOS.launch()
    finally:
        DBOS.destroy()


def best(starts: int, start: Callable[[int], None]) -> float:
    times = []
    for i in range(starts):
        began = time.perf_counter()
        start(i)
        times.append(time.perf_counter() - began)
    return min(times)


def adapter(databases: Any) -> Callable[[int], None]:
    def start(i: int) -> None:
        with WorkflowSubject(Context(f"run-{i}", ScenarioLog()), nothing, databases=databases):
            pass

    return start


def restart(databases: Any) -> Callable[[int], None]:
    """A start of a scenario whose database exists, that dies (no drop)."""

    def start(i: int) -> None:
        subject = WorkflowSubject(Context("again", ScenarioLog()), nothing, databases=databases)
        subject.__exit__(SimulatedCrash, SimulatedCrash("bench"), None)

    return start


def figures(name: str, starts: int, launched: str, fresh: Callable[[int], str], made: Any) -> None:
    launch(launched)  # migrated once; every later launch finds it current
    own = best(starts, lambda i: launch(launched))
    rows = {
        "dbos launch": own,
        "fresh database": best(starts, lambda i: launch(fresh(i))),
        "adapter": best(starts, adapter(made)),
        "adapter restart": best(starts, restart(made)),
    }
    for what, seconds in rows.items():
        print(f"{name:10} {what:15} {seconds * 1e3:7.1f} ms  {seconds / own:5.2f} x dbos launch")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--starts", type=int, default=DEFAULT_STARTS)
    starts = parser.parse_args().starts
    with tempfile.TemporaryDirectory() as folder:
        here = Path(folder)
        sqlite = SqliteDatabases(here / "adapter")
        sqlite.directory.mkdir()
        figures(
            "sqlite",
            starts,
            f"sqlite:///{here}/own.sqlite",
            lambda i: f"sqlite:///{here}/fresh-{i}.sqlite",
            sqlite,
        )
    with database() as url:
        postgres = PostgresDatabases(url, prefix="bench")
        try:
            other = PostgresDatabases(url, prefix="bench_fresh")
            figures(
                "postgres",
                starts,
                postgres.database_url(postgres.base + "own"),
                lambda i: other.database_url(other.base + str(i)),
                postgres,
            )
        finally:
            postgres.close()
            other.close()


if __name__ == "__main__":
    main()
