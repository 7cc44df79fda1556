"""Shared set-up of the benchmarks: a database, and an in-memory-disk place for mock state."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from psycopg.conninfo import conninfo_to_dict, make_conninfo

from agent_runtime.localpg.pgcluster import LocalCluster
from agent_runtime.store import db
from agent_runtime.store.queries import NamedQueries, load_queries

QUERIES: NamedQueries = load_queries(Path(__file__).with_name("sql"))

# The bench cluster's durability, forced whatever a default elsewhere says: every figure
# is a ratio to a commit that waits for the WAL flush.
DURABLE = {"fsync": "on", "synchronous_commit": "on"}


@contextmanager
def database(extra: dict[str, str] | None = None) -> Iterator[str]:
    """DATABASE_URL if set, else a throwaway local cluster (fsync and synchronous_commit
    on, and any ``extra`` server settings) removed afterwards."""
    url = os.environ.get("DATABASE_URL")
    if url:
        yield url
        return
    cluster = LocalCluster.throwaway(settings={**DURABLE, **(extra or {})})
    try:
        yield cluster.ensure_running()
    finally:
        cluster.remove()


def server_settings(url: str) -> dict[str, str]:
    """The settings the figures depend on, as a session of the benchmark sees them."""
    with db.connection(url) as conn:
        rows = conn.execute(QUERIES["server_settings"]).fetchall()
    return {row["name"]: row["setting"] for row in rows}


def print_settings(url: str) -> dict[str, str]:
    """Print the server's durability settings; refuse a server that does not fsync."""
    settings = server_settings(url)
    shown = " ".join(f"{k}={v}" for k, v in settings.items() if k != "data_directory")
    print(f"server: {shown}")
    print(f"  data: {settings.get('data_directory', '?')} (on {_filesystem(settings)})")
    if settings.get("fsync") != "on" or settings.get("synchronous_commit") != "on":
        raise SystemExit(
            "these figures are ratios to a durable commit: the server needs fsync=on and "
            "synchronous_commit=on (unset DATABASE_URL for a throwaway cluster that has them)"
        )
    return settings


def _filesystem(settings: dict[str, str]) -> str:
    """The file system type of the data directory (Linux), or 'unknown'."""
    where = settings.get("data_directory", "")
    best, kind = "", "unknown"
    try:
        with open("/proc/mounts", encoding="utf-8") as mounts:
            for line in mounts:
                _, point, fstype, *_ = line.split()
                if where.startswith(point) and len(point) > len(best):
                    best, kind = point, fstype
    except OSError:
        pass
    return kind


def database_name(url: str) -> str:
    """The name of the database ``url`` connects to."""
    return str(conninfo_to_dict(url).get("dbname") or "")


def other_database(url: str, dbname: str = "postgres") -> str:
    """The same server, another database: where a reader of statistics does not count."""
    return make_conninfo(url, dbname=dbname)


def fresh_journal(url: str) -> None:
    with db.connection(url) as conn:
        db.ensure_schema(conn)
        db.run(conn, "delete_all_runs")
        conn.execute(QUERIES["reset_clock"])


@contextmanager
def scratch() -> Iterator[Path]:
    """Mock state on tmpfs when there is one: the cloud's own fsync is not what we measure."""
    base = "/dev/shm" if os.path.isdir("/dev/shm") else None
    with tempfile.TemporaryDirectory(prefix="crashresume-bench-", dir=base) as d:
        yield Path(d)
