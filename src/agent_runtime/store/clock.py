"""The one clock lease logic reads: ``cr_now()`` in the database.

``cr_now()`` is the server's clock plus a skew kept in the ``cr_clock`` table, so
moving it moves time for every worker and supervisor on that database at once.
Tests expire a lease by advancing the skew past it; nobody sleeps. A frozen clock
(:func:`freeze`) stands still between two moves, for suites that must not depend on
how fast the machine runs. The statements are in ``sql/clock.sql``.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from agent_runtime.store import db


def now(conn: db.Connection) -> datetime:
    row = db.one(conn, "clock_now")
    assert row is not None
    value: datetime = row["now"]
    return value


def skew(conn: db.Connection) -> timedelta:
    row = db.one(conn, "clock_skew")
    assert row is not None
    value: timedelta = row["skew"]
    return value


def frozen_at(conn: db.Connection) -> datetime | None:
    """Where the clock stands still (:func:`freeze`), or None while it runs."""
    row = db.one(conn, "clock_frozen_at")
    assert row is not None
    value: datetime | None = row["frozen_at"]
    return value


def set_skew(conn: db.Connection, seconds: float) -> None:
    db.run(conn, "clock_set_skew", {"seconds": seconds})


def freeze(conn: db.Connection, at: datetime | None = None) -> datetime:
    """Stop the clock (at ``at``, default the server's time now) until :func:`thaw`.

    From then on ``cr_now()`` moves only when :func:`advance` moves it, so leases expire
    exactly when a test says and never because the machine was slow. The skew resets.
    """
    row = db.one(conn, "clock_freeze", {"at": at})
    assert row is not None
    value: datetime = row["frozen_at"]
    return value


def thaw(conn: db.Connection) -> None:
    """Let the server's clock run again (skew reset)."""
    db.run(conn, "clock_thaw")


def advance(conn: db.Connection, seconds: float) -> datetime:
    """Move the clock forward by ``seconds`` for everyone; returns the new time."""
    db.run(conn, "clock_advance", {"seconds": seconds})
    return now(conn)
