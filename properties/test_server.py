"""The suite's own database loses what was not written out and keeps what was, and what a
crash loses depends on the schedule alone, never on how long it took."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg

from .events import Event
from .runners import InProcessRunner
from .server import SuiteDatabase

FAST_TIMER = "10ms"  # the WAL writer's shortest timer
WAIT = 0.3  # seconds: thirty rounds of the fast timer, three of a 100 ms one
WRITTEN_WITHIN = 20.0  # seconds a running WAL writer may take to be scheduled under load


@contextmanager
def _fast_wal_writer(database: SuiteDatabase) -> Iterator[None]:
    """The WAL writer's timer at its shortest: left running, it would write a relaxed
    commit out within ten milliseconds."""
    with psycopg.connect(database.url, autocommit=True) as conn:
        conn.execute("ALTER SYSTEM SET wal_writer_delay = '10ms'")  # FAST_TIMER
        conn.execute("SELECT pg_reload_conf()")
    try:
        yield
    finally:
        with psycopg.connect(database.url, autocommit=True) as conn:
            conn.execute("ALTER SYSTEM RESET wal_writer_delay")
            conn.execute("SELECT pg_reload_conf()")


def _commit_both(database: SuiteDatabase, n: int) -> Any:
    """A durable row and then a relaxed one; the WAL position after the relaxed commit."""
    with psycopg.connect(database.url, autocommit=True) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS crash_probe (n int, durable bool)")
        conn.execute("INSERT INTO crash_probe VALUES (%s, true)", (n,))
        with conn.transaction():
            conn.execute("SET LOCAL synchronous_commit = off")
            conn.execute("INSERT INTO crash_probe VALUES (%s, false)", (n,))
        return conn.execute("SELECT pg_current_wal_insert_lsn()").fetchone()[0]  # type: ignore[index]


def _written(database: SuiteDatabase, lsn: Any) -> bool:
    with psycopg.connect(database.url, autocommit=True) as conn:
        row = conn.execute("SELECT pg_current_wal_flush_lsn() >= %s::pg_lsn", (lsn,)).fetchone()
        return bool(row and row[0])


def _kept_after_crash(database: SuiteDatabase, n: int) -> set[bool]:
    database.crash()
    with psycopg.connect(database.url, autocommit=True) as conn:
        kept = {r[0] for r in conn.execute("SELECT durable FROM crash_probe WHERE n = %s", (n,))}
        conn.execute("DELETE FROM crash_probe WHERE n = %s", (n,))
    return kept


def test_a_relaxed_commit_is_lost_at_a_crash_however_long_ago_it_was_made(
    suite_database: SuiteDatabase,
) -> None:
    suite_database.hold_wal_writer()  # as before every example (a command may release it)
    with _fast_wal_writer(suite_database):
        lsn = _commit_both(suite_database, 1)
        time.sleep(WAIT)  # the point is the wall time: far past the writer's timer
        assert not _written(suite_database, lsn), "the held WAL writer wrote a relaxed commit"
        assert _kept_after_crash(suite_database, 1) == {True}


def test_a_wal_writer_left_running_writes_a_relaxed_commit_out_on_its_own_timer(
    suite_database: SuiteDatabase,
) -> None:
    """Why the writer is held: running, wall time decides what a crash loses."""
    with _fast_wal_writer(suite_database):
        suite_database.release_wal_writer()
        try:
            lsn = _commit_both(suite_database, 2)
            deadline = time.monotonic() + WRITTEN_WITHIN
            while not _written(suite_database, lsn):
                assert time.monotonic() < deadline, "the running WAL writer never wrote it"
                time.sleep(0.01)
        finally:
            kept = _kept_after_crash(suite_database, 2)  # the restart holds the new writer
    assert kept == {True, False}


def _replay_waiting(runner: InProcessRunner, events: list[Event], wait: float) -> Any:
    """Replay ``events``, waiting ``wait`` seconds of wall time before the last one."""
    runner.warm()
    runner.reset()
    try:
        for i, event in enumerate(events):
            if i == len(events) - 1:
                time.sleep(wait)
            runner.apply(event)
            runner.check()
        runner.settle()
        runner.check_final()
        return runner.outcome(), list(runner.trace)
    finally:
        runner.cleanup()


def test_a_database_crash_takes_the_same_writes_back_however_long_the_schedule_waits(
    suite_database: SuiteDatabase, inprocess_runner: InProcessRunner
) -> None:
    events = [
        Event(op="start", run=0),
        Event(op="stall", run=0, point="before_intent"),  # its answer committed, relaxed
        Event(op="db_crash"),
    ]
    with _fast_wal_writer(suite_database):
        at_once = _replay_waiting(inprocess_runner, events, 0.0)
        later = _replay_waiting(inprocess_runner, events, WAIT)
    assert later == at_once
    outcome, _ = at_once
    assert outcome["r0"]["model_calls"] == outcome["r0"]["llm_calls"] + 1  # asked again


def test_a_command_sharing_the_suites_server_leaves_its_wal_writer_held(
    suite_database: SuiteDatabase,
) -> None:
    """The replay and nightly commands the tests start run on the session's own cluster:
    closing them must not let its writer go between two examples."""
    suite_database.hold_wal_writer()
    command = SuiteDatabase(suite_database.cluster.datadir)
    command.close()
    with _fast_wal_writer(suite_database):
        lsn = _commit_both(suite_database, 3)
        time.sleep(WAIT)
        assert not _written(suite_database, lsn), "the command let the session's writer go"
        assert _kept_after_crash(suite_database, 3) == {True}
