"""Every claim says in ``run_claims.reason`` why it could take the run, and the operator
view states that reason instead of guessing it. Real PostgreSQL; time moves through
``cr_now()``'s skew."""

from __future__ import annotations

import re
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import make_conninfo

from agent_runtime.config import Settings
from agent_runtime.errors import EXIT_RETRY_LATER, DatabaseError
from agent_runtime.llm.models import DecideModel
from agent_runtime.loop.lease import owner_token
from agent_runtime.loop.worker import Worker
from agent_runtime.operator import read_history
from agent_runtime.store import clock, db, migrate
from agent_runtime.store.journal import Journal
from agent_runtime.store.records import Lease

from .fix_runtime import SERVER
from .operator_cli import ELSEWHERE, cli

LEASE = 12.0  # seconds


def _reasons(conn: Any, run_id: str) -> list[str | None]:
    rows = conn.execute(
        "SELECT reason FROM run_claims WHERE run_id = %s ORDER BY generation", (run_id,)
    ).fetchall()
    return [r["reason"] for r in rows]


def _dead_owner() -> str:
    """The token of a process of this host that has exited and been reaped."""
    with subprocess.Popen([sys.executable, "-c", "pass"]) as child:
        child.wait()
    return owner_token(child.pid)


def _worker(conn: Any) -> Worker:
    """A worker for claims only: its remotes are never called."""
    return Worker(
        Journal(conn),
        Settings(cloud_url="http://127.0.0.1:9"),
        model=DecideModel("http://127.0.0.1:9", timeout=1.0),
    )


def _held(journal: Journal, run_id: str, owner: str) -> Lease:
    journal.create_run(run_id)
    lease = journal.claim(run_id, owner, LEASE)
    assert lease is not None
    journal.record_decision(lease, 0, "create_server", dict(SERVER))
    journal.record_intent(lease, 0)
    return lease


@pytest.mark.usefixtures("frozen_clock")
def test_each_way_of_claiming_a_run_records_its_own_reason(conn: Any) -> None:
    journal = Journal(conn)
    journal.create_run("r")
    first = journal.claim("r", "a:1:x", LEASE)
    assert first is not None
    assert journal.release(first, "RemoteUnavailable: try later")
    back = journal.claim("r", "b:2:y", LEASE)
    assert back is not None
    clock.advance(conn, LEASE + 1)  # b stops renewing; nobody sleeps
    late = journal.claim("r", "c:3:z", LEASE)
    assert late is not None
    proved = journal.claim("r", "d:4:w", LEASE, dead_owner="c:3:z", dead_generation=3)
    assert proved is not None
    forced = journal.claim("r", "e:5:v", LEASE, dead_owner="d:4:w", dead_generation=4, forced=True)
    assert forced is not None

    assert _reasons(conn, "r") == ["first", "handed_back", "expired", "owner_dead", "forced"]


@pytest.mark.usefixtures("frozen_clock")
def test_the_supervisors_claims_record_first_handed_back_and_expired(conn: Any) -> None:
    journal = Journal(conn)
    journal.create_run("new")
    _held(journal, "expiring", "elsewhere:1:a")
    exited = _held(journal, "exited", "elsewhere:2:b")
    params = {"run": "exited", "generation": exited.generation, "delay": 0, "reason": None}
    db.run(conn, "expire_lease_of", params)
    clock.advance(conn, LEASE + 1)
    params = {"owner": "sup:9:s", "lease": LEASE, "limit": 10, "max_attempts": 5, "agents": None}

    claimed = db.run(conn, "claim_expired", params)

    assert sorted(r["id"] for r in claimed) == ["exited", "expiring", "new"]
    assert _reasons(conn, "new") == ["first"]
    assert _reasons(conn, "expiring") == ["first", "expired"]
    assert _reasons(conn, "exited") == ["first", "handed_back"]
    row = next(r for r in claimed if r["id"] == "expiring")
    lease = Lease(run_id="expiring", owner=row["owner"], generation=row["generation"])
    assert journal.adopt(lease, "w:7:q")[0].owner == "w:7:q"
    assert _reasons(conn, "expiring") == ["first", "expired"]  # adoption keeps the reason


def test_a_worker_records_owner_dead_only_with_proof_and_forced_otherwise(conn: Any) -> None:
    journal = Journal(conn)
    _held(journal, "dead", _dead_owner())
    _held(journal, "alive", ELSEWHERE)  # another host: never provably dead
    worker = _worker(conn)
    try:
        assert worker.claim("dead") is not None
        assert worker.claim("alive", takeover=True) is not None
        _held(journal, "both", _dead_owner())
        assert worker.claim("both", takeover=True) is not None  # proof wins over force
    finally:
        worker.close_clients()

    assert _reasons(conn, "dead") == ["first", "owner_dead"]
    assert _reasons(conn, "alive") == ["first", "forced"]
    assert _reasons(conn, "both") == ["first", "owner_dead"]


def test_the_schema_refuses_a_reason_it_does_not_define(conn: Any) -> None:
    Journal(conn).create_run("odd")
    with pytest.raises(psycopg.errors.CheckViolation):
        conn.execute(
            "INSERT INTO run_claims (run_id, generation, owner, reason) "
            "VALUES ('odd', 1, 'x:1:y', 'guessed')"
        )


def test_show_states_a_forced_takeover_and_a_proved_death_without_hedging(
    conn: Any, database_url: str, tmp_path: Path
) -> None:
    journal = Journal(conn)
    _held(journal, "forced", ELSEWHERE)
    _held(journal, "proved", _dead_owner())
    worker = _worker(conn)
    try:
        assert worker.claim("forced", takeover=True) is not None
        assert worker.claim("proved") is not None
    finally:
        worker.close_clients()
    picture = tmp_path / "forced.svg"

    forced = cli(database_url, "show", "forced", "--svg", str(picture))
    proved = cli(database_url, "show", "proved", "--json")

    assert forced.code == 0, forced.stderr
    assert "a forced takeover, nobody proved that worker dead" in forced.stdout
    assert "took its live lease by force; if it still runs, its next write is fenced" in (
        forced.stdout
    )
    assert "or the takeover was forced" not in forced.stdout
    svg = picture.read_text("utf-8")
    assert 'data-kind="fenced"' in svg and "took over: forced" in svg
    assert "died or fenced" not in svg and "live lease<" not in svg
    data = proved.json()
    assert [(c["kind"], c["reason"]) for c in data["claims"]] == [
        ("first", "first"),
        ("live", "owner_dead"),
    ]
    texts = [e["text"] for e in data["events"] if e["kind"] in ("takeover", "crash")]
    assert any("its process was proved gone on its host" in t for t in texts)
    assert not any("or the takeover was forced" in t for t in texts)


@pytest.fixture
def older_database(conn: Any, database_url: str) -> Iterator[str]:
    """A database whose schema predates run_claims.reason, with one live takeover in it."""
    name = f"cr_older_{uuid.uuid4().hex[:8]}"
    conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    url = make_conninfo(database_url, dbname=name)
    try:
        with db.connection(url) as old:
            db.ensure_schema(old)
            journal = Journal(old)
            _held(journal, "before", ELSEWHERE)
            taken = journal.claim(
                "before", "thief:1:t", LEASE, dead_owner=ELSEWHERE, dead_generation=1
            )
            assert taken is not None
            # as schema 2 before claim reasons (7b9702b) made it: no reason, no
            # schema_version, its version in the comment on runs
            old.execute("ALTER TABLE run_claims DROP COLUMN reason")
            old.execute("DROP TABLE schema_version")
            old.execute("COMMENT ON TABLE runs IS 'crashresume schema 2'")
        yield url
    finally:
        conn.execute(sql.SQL("DROP DATABASE {}").format(sql.Identifier(name)))


def test_an_older_database_is_refused_by_the_operator_and_upgraded_by_a_worker(
    older_database: str,
) -> None:
    with db.connection(older_database) as old:
        assert not db.has_schema(old)
        with pytest.raises(
            DatabaseError,
            match=re.escape(f"older crashresume schema (version 2, not {migrate.known().latest})"),
        ):
            db.require_schema(old)
    refused = cli(older_database, "show", "before")
    assert refused.code == EXIT_RETRY_LATER and "older crashresume schema" in refused.stderr

    with db.connection(older_database) as conn:
        db.ensure_schema(conn)  # what every worker does on start
        assert db.has_schema(conn)
        history = read_history(conn, "before")

    claim = history.claims[1]
    assert (claim.reason, claim.why, claim.kind) == (None, None, "live")  # never recorded
    takeover = next(e for e in history.events if e.kind == "takeover")
    assert "proved gone, or the takeover was forced" in takeover.text
