"""The journal against a real PostgreSQL: fencing, the clock seam, the schema."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
from psycopg.conninfo import make_conninfo

from agent_runtime.errors import DatabaseError, LeaseLost
from agent_runtime.store import clock, db, migrate
from agent_runtime.store.journal import Journal

ROOT = Path(__file__).resolve().parent.parent


def test_the_shipped_schema_is_the_one_at_the_root() -> None:
    assert migrate.known().whole == (ROOT / "schema.sql").read_text("utf-8")


def test_many_connections_creating_the_schema_at_once_create_it_once(
    conn: Any, database_url: str
) -> None:
    conn.execute("DROP DATABASE IF EXISTS cr_race")
    conn.execute("CREATE DATABASE cr_race")
    errors: list[BaseException] = []
    url = make_conninfo(database_url, dbname="cr_race")

    def apply() -> None:
        try:
            with db.connection(url) as c:
                db.ensure_schema(c)
                db.ensure_schema(c)
        except BaseException as exc:
            errors.append(exc)

    try:
        threads = [threading.Thread(target=apply) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        with db.connection(url) as c:
            rows = c.execute("SELECT version, how FROM schema_version").fetchall()
        assert rows == [{"version": migrate.known().latest, "how": "created"}]
    finally:
        conn.execute("DROP DATABASE cr_race WITH (FORCE)")


def test_an_empty_database_is_reported_as_having_no_schema(conn: Any, database_url: str) -> None:
    conn.execute("DROP DATABASE IF EXISTS cr_empty")
    conn.execute("CREATE DATABASE cr_empty")
    try:
        empty_url = make_conninfo(database_url, dbname="cr_empty")
        with (
            db.connection(empty_url) as empty,
            pytest.raises(DatabaseError, match="no crashresume schema"),
        ):
            db.require_schema(empty)
    finally:
        conn.execute("DROP DATABASE cr_empty")


@pytest.mark.usefixtures("frozen_clock")
def test_a_write_under_an_old_generation_changes_nothing(conn: Any) -> None:
    journal = Journal(conn)
    journal.create_run("r")
    old = journal.claim("r", "a:1:x", 12.0)
    assert old is not None
    clock.advance(conn, 13)  # the old owner stopped renewing; nobody slept
    new = journal.claim("r", "b:2:y", 12.0)
    assert new is not None and new.generation == old.generation + 1
    with pytest.raises(LeaseLost, match="decision seq=0 not written"):
        journal.record_decision(old, 0, "create_server", {"name": "srv-1"})
    journal.record_decision(new, 0, "create_server", {"name": "srv-1"})
    intent = journal.record_intent(new, 0)
    with pytest.raises(LeaseLost):
        journal.record_intent(old, 1)
    with pytest.raises(LeaseLost):
        journal.record_confirm(old, intent, {"id": "i-1"}, "created")
    with pytest.raises(LeaseLost):
        journal.finish(old)
    history = journal.history("r")
    assert [c.state for c in history.calls.values()] == ["intent"]
    assert journal.require_run("r").llm_calls == 1


@pytest.mark.usefixtures("frozen_clock")
def test_a_live_lease_is_not_claimable_until_the_clock_passes_it(conn: Any) -> None:
    journal = Journal(conn)
    journal.create_run("r")
    assert journal.claim("r", "a:1:x", 12.0) is not None
    assert journal.claim("r", "b:2:y", 12.0) is None
    clock.advance(conn, 11.5)
    assert journal.claim("r", "b:2:y", 12.0) is None
    clock.advance(conn, 1.0)
    assert journal.claim("r", "b:2:y", 12.0) is not None


@pytest.mark.usefixtures("frozen_clock")
def test_a_renewed_lease_outlives_the_original_expiry(conn: Any) -> None:
    journal = Journal(conn)
    journal.create_run("r")
    lease = journal.claim("r", "a:1:x", 12.0)
    assert lease is not None
    clock.advance(conn, 10)
    journal.renew(lease, 12.0)
    clock.advance(conn, 10)
    assert journal.claim("r", "b:2:y", 12.0) is None


def test_the_confirm_commits_without_waiting_for_the_wal_flush(conn: Any) -> None:
    journal = Journal(conn)
    journal.create_run("r")
    lease = journal.claim("r", "a:1:x", 12.0)
    assert lease is not None
    journal.record_decision(lease, 0, "create_server", {"name": "srv-1"})
    intent = journal.record_intent(lease, 0)
    with conn.transaction():
        assert conn.execute("SHOW synchronous_commit").fetchone()["synchronous_commit"] == "on"
        journal.record_confirm(lease, intent, {"id": "i-1"}, "created")
        setting = conn.execute("SHOW synchronous_commit").fetchone()["synchronous_commit"]
    assert setting == "off"
    assert conn.execute("SHOW synchronous_commit").fetchone()["synchronous_commit"] == "on"
    assert journal.history("r").calls[0].confirmed
