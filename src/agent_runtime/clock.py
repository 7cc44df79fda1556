"""The one clock lease logic reads: ``cr_now()`` in the database.

``cr_now()`` is the server's clock plus a skew kept in the ``cr_clock`` table, so
moving it moves time for every worker and supervisor on that database at once.
Tests expire a lease by advancing the skew past it; nobody sleeps. The statements
are in ``sql/clock.sql``.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from . import db


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


def set_skew(conn: db.Connection, seconds: float) -> None:
    db.run(conn, "clock_set_skew", {"seconds": seconds})


def advance(conn: db.Connection, seconds: float) -> datetime:
    """Move the clock forward by ``seconds`` for everyone; returns the new time."""
    db.run(conn, "clock_advance", {"seconds": seconds})
    return now(conn)
