"""The suite's own database can really lose what was not flushed, and keeps what was."""

from __future__ import annotations

import psycopg

from .server import SuiteDatabase

TRIES = 5  # the WAL writer flushes every 10 s: a crash right after a commit beats it


def test_a_crash_loses_an_unflushed_commit_and_keeps_a_durable_one(
    suite_database: SuiteDatabase,
) -> None:
    lost = 0
    for attempt in range(TRIES):
        with psycopg.connect(suite_database.url, autocommit=True) as conn:
            conn.execute("CREATE TABLE IF NOT EXISTS crash_probe (n int, durable bool)")
            conn.execute("INSERT INTO crash_probe VALUES (%s, true)", (attempt,))
            with conn.transaction():
                conn.execute("SET LOCAL synchronous_commit = off")
                conn.execute("INSERT INTO crash_probe VALUES (%s, false)", (attempt,))
        suite_database.crash()
        with psycopg.connect(suite_database.url, autocommit=True) as conn:
            rows = set(conn.execute("SELECT durable FROM crash_probe WHERE n = %s", (attempt,)))
        assert (True,) in rows  # a durable commit survives every crash
        lost += (False,) not in rows
        if lost:
            break
    with psycopg.connect(suite_database.url, autocommit=True) as conn:
        conn.execute("DROP TABLE crash_probe")
    assert lost, f"no asynchronous commit was lost in {TRIES} crashes: the event proves nothing"
