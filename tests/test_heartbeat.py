"""The heartbeat's one renewal: it keeps the owner's lease, and fences anyone else."""

from __future__ import annotations

import functools
from typing import Any

import pytest

from agent_runtime.loop.lease import Heartbeat
from agent_runtime.store import clock, db
from agent_runtime.store.journal import Journal
from agent_runtime.store.records import Lease

LEASE = 12.0
APP = "test_heartbeat"  # application_name of the heartbeat's own connection


def _heartbeat(database_url: str, lease: Lease) -> Heartbeat:
    return Heartbeat(
        lease,
        connect=functools.partial(db.connect, database_url, application_name=APP),
        lease_seconds=LEASE,
        interval=3.0,
    )


def _claimed(conn: Any, run: str, owner: str) -> Lease:
    journal = Journal(conn)
    journal.create_run(run)
    lease = journal.claim(run, owner, LEASE)
    assert lease is not None
    return lease


@pytest.mark.usefixtures("frozen_clock")
def test_the_owners_beat_moves_its_lease_past_the_clock(conn: Any, database_url: str) -> None:
    lease = _claimed(conn, "hb-owner", "w1")
    heartbeat = _heartbeat(database_url, lease)
    try:
        clock.advance(conn, LEASE - 1)
        expires = heartbeat.beat()
        assert expires is not None and expires > clock.now(conn)
        clock.advance(conn, LEASE - 1)  # past the claim's expiry, within the renewal's
        assert Journal(conn).claim("hb-owner", "w2", LEASE) is None
        assert not heartbeat.lost.is_set()
    finally:
        heartbeat.stop()


@pytest.mark.usefixtures("frozen_clock")
def test_a_beat_after_a_takeover_fails_and_marks_the_worker_fenced(
    conn: Any, database_url: str
) -> None:
    old = _claimed(conn, "hb-stolen", "w1")
    heartbeat = _heartbeat(database_url, old)
    try:
        clock.advance(conn, LEASE + 1)
        new = Journal(conn).claim("hb-stolen", "w2", LEASE)
        assert new is not None and new.generation == old.generation + 1
        before = Journal(conn).require_run("hb-stolen").lease_expires_at
        assert heartbeat.beat() is None
        assert heartbeat.lost.is_set()
        assert Journal(conn).require_run("hb-stolen").lease_expires_at == before
        assert heartbeat.beat() is None  # lost for good: it does not try again
    finally:
        heartbeat.stop()


def test_a_beat_whose_connection_was_dropped_fails_once_and_reconnects(
    conn: Any, database_url: str
) -> None:
    lease = _claimed(conn, "hb-dropped", "w1")
    heartbeat = _heartbeat(database_url, lease)
    try:
        assert heartbeat.beat() is not None
        backend = conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE application_name = %s", (APP,)
        ).fetchone()
        assert backend is not None
        conn.execute("SELECT pg_terminate_backend(%s)", (backend["pid"],))
        assert heartbeat.beat() is None
        assert not heartbeat.lost.is_set()
        assert heartbeat.beat() is not None
    finally:
        heartbeat.stop()


def test_a_frozen_clock_moves_only_when_advanced(conn: Any) -> None:
    from datetime import UTC, datetime, timedelta

    start = datetime(2030, 1, 1, tzinfo=UTC)
    try:
        assert clock.freeze(conn, start) == start
        assert clock.now(conn) == start
        lease = _claimed(conn, "hb-frozen", "w1")
        expires = Journal(conn).require_run(lease.run_id).lease_expires_at
        assert expires == start + timedelta(seconds=LEASE)
        clock.advance(conn, LEASE)  # exactly at the expiry: claimable, not a moment later
        assert clock.now(conn) == expires
        assert Journal(conn).claim("hb-frozen", "w2", LEASE) is not None
    finally:
        clock.thaw(conn)
    assert clock.now(conn) < start  # the server's own clock again (it is not 2030 yet)
