"""Shared set-up of the benchmarks: a database, and an in-memory-disk place for mock state."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from agent_runtime import db
from agent_runtime.pgcluster import LocalCluster


@contextmanager
def database() -> Iterator[str]:
    """DATABASE_URL if set, else a throwaway local cluster removed afterwards."""
    url = os.environ.get("DATABASE_URL")
    if url:
        yield url
        return
    cluster = LocalCluster.throwaway()
    try:
        yield cluster.ensure_running()
    finally:
        cluster.remove()


def fresh_journal(url: str) -> None:
    with db.connection(url) as conn:
        db.ensure_schema(conn)
        conn.execute("DELETE FROM runs")
        conn.execute("UPDATE cr_clock SET skew = interval '0'")


@contextmanager
def scratch() -> Iterator[Path]:
    """Mock state on tmpfs when there is one: the cloud's own fsync is not what we measure."""
    base = "/dev/shm" if os.path.isdir("/dev/shm") else None
    with tempfile.TemporaryDirectory(prefix="crashresume-bench-", dir=base) as d:
        yield Path(d)
