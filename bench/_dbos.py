"""DBOS Transact's trivial step, on the benchmark's server: the comparison subject.

A ``@DBOS.step()`` that returns its argument, called ``n`` times in a row by one
``@DBOS.workflow()``. In DBOS 3.4 a step call checks a pooled connection out twice: one
transaction looks for a recorded result (``check_operation_execution``), one inserts the
output under the workflow's ownership check (``record_operation_result``, the one durable
commit); the engine pings every checkout (``pool_pre_ping``), which the server counts as
transactions too. A workflow adds its status row at the start and its outcome at the end,
which ``n`` steps minus zero steps takes out.

DBOS keeps its system tables in a database of its own (``bench_dbos``, created by DBOS
on first launch) on the same server, so its commits wait for the same WAL flush.
Importing this module needs ``dbos`` (``pip install -e '.[bench]'``).
"""

from __future__ import annotations

from importlib.metadata import version as installed
from typing import Final

import sqlalchemy
from dbos import DBOS, DBOSConfig
from psycopg.conninfo import conninfo_to_dict

DATABASE: Final = "bench_dbos"
LISTENER_POLL: Final = 0.1  # seconds: how often DBOS's listener wakes, and its shutdown waits


@DBOS.step()
def trivial(i: int) -> int:
    return i


@DBOS.workflow()
def steps(n: int) -> int:
    total = 0
    for i in range(n):
        total += trivial(i)
    return total


def system_url(url: str) -> str:
    """``url``'s server, DBOS's own database, as the SQLAlchemy URL DBOS takes."""
    info = {key: str(value) for key, value in conninfo_to_dict(url).items()}
    made = sqlalchemy.engine.URL.create(
        "postgresql",
        username=info.get("user"),
        password=info.get("password"),
        host=info.get("host"),
        port=int(info["port"]) if "port" in info else None,
        database=DATABASE,
    )
    return made.render_as_string(hide_password=False)


class DbosSteps:
    """DBOS launched on ``url``'s server until :meth:`close`."""

    def __init__(self, url: str) -> None:
        config: DBOSConfig = {
            "name": "crashresume-bench",
            "system_database_url": system_url(url),
            "log_level": "WARNING",
            "notification_listener_polling_interval_sec": LISTENER_POLL,
        }
        DBOS(config=config)
        DBOS.launch()

    def run(self, n: int) -> None:
        if steps(n) != n * (n - 1) // 2:
            raise SystemExit(f"the DBOS workflow of {n} steps returned the wrong sum")

    def close(self) -> None:
        DBOS.destroy()


def version() -> str:
    return installed("dbos")
