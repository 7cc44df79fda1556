"""Fixtures for runtime tests: a clean journal per test, a real agent process, and the
support agents as real processes (``desk``: tests/desk.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import httpx
import pytest

from agent_runtime.store import clock, db
from agent_runtime.store.journal import Journal
from agent_runtime.store.records import Lease

from .desk import Desk

AGENT_TIMEOUT = 60  # seconds one agent process may take before the test fails
# The provisioning plan's first arguments, for a decision a test records through the journal.
SERVER = {"name": "srv-1", "size": "small", "region": "local-1"}


def reset_journal(conn: db.Connection) -> None:
    """DELETE, not a new database: a few hundred microseconds per test."""
    db.run(conn, "delete_all_runs")
    conn.execute("UPDATE cr_clock SET skew = interval '0', frozen_at = NULL")


def plan_nodes(plan: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Every node of an ``EXPLAIN (FORMAT JSON)`` plan, the root first."""
    yield plan
    for child in plan.get("Plans", []):
        yield from plan_nodes(child)


def run_with_intent(conn: db.Connection, run_id: str, owner: str = "w") -> Lease:
    """A run claimed by ``owner`` with one decision and its intent at seq 0, unconfirmed."""
    journal = Journal(conn)
    journal.create_run(run_id)
    lease = journal.claim(run_id, owner, 60.0)
    assert lease is not None
    journal.record_decision(lease, 0, "create_server", {"name": "srv-1"})
    journal.record_intent(lease, 0)
    return lease


@pytest.fixture
def conn(database_url: str) -> Iterator[db.Connection]:
    with db.connection(database_url) as c:
        db.ensure_schema(c)
        reset_journal(c)
        yield c


@pytest.fixture
def frozen_clock(conn: db.Connection) -> Iterator[datetime]:
    """The database clock stopped for the whole test (``clock.freeze``), so a lease,
    backoff or give-up passes when the test advances it and never because the machine
    was slow; worker and supervisor processes read the same ``cr_clock`` row."""
    at = clock.freeze(conn)
    yield at
    clock.thaw(conn)


def _advance_only_a_frozen_clock(real: Callable[..., datetime]) -> Callable[..., datetime]:
    def advance(conn: db.Connection, seconds: float) -> datetime:
        if clock.frozen_at(conn) is None:
            pytest.fail(
                "clock.advance on a running clock: what it expires then depends on how fast "
                "the machine is; freeze it first (the frozen_clock fixture or clock.freeze)",
                pytrace=False,
            )
        return real(conn, seconds)

    return advance


@pytest.fixture(autouse=True)
def advance_needs_a_frozen_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    """The rule of ARCHITECTURE.md's testing section, checked where it is broken: a test
    that moves ``cr_now()`` has stopped it first."""
    monkeypatch.setattr(clock, "advance", _advance_only_a_frozen_clock(clock.advance))


@dataclass(frozen=True)
class AgentResult:
    code: int
    out: str

    def lines(self, event: str) -> list[str]:
        return [ln for ln in self.out.splitlines() if f" {event} " in f" {ln} "]


@dataclass
class Agent:
    """Runs ``python -m agent_runtime`` as a real process against the test's remotes."""

    database_url: str
    cloud_url: str
    model_url: str

    def env(self, run_id: str, **extra: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in ("CRASH_AT", "CRASH_SEQ")}
        env.update(
            DATABASE_URL=self.database_url,
            CLOUD_URL=self.cloud_url,
            MODEL_URL=self.model_url,
            RUN_ID=run_id,
        )
        env.update(extra)  # a test may override any of the above, e.g. a broken CLOUD_URL
        return env

    def run(self, run_id: str, *args: str, **extra: str) -> AgentResult:
        proc = subprocess.run(
            [sys.executable, "-m", "agent_runtime", *args],
            env=self.env(run_id, **extra),
            capture_output=True,
            text=True,
            timeout=AGENT_TIMEOUT,
        )
        return AgentResult(code=proc.returncode, out=proc.stdout + proc.stderr)


@pytest.fixture
def agent(database_url: str, mock_servers: Any, conn: db.Connection) -> Agent:
    mock_servers.reset()
    return Agent(database_url, mock_servers.cloud_url, mock_servers.model_url)


@pytest.fixture
def desk(agent: Agent, mock_servers: Any, database_url: str) -> Desk:
    """The support agents (``tests.agents``) as real processes against the uvicorn mocks."""
    return Desk(agent, mock_servers, database_url)


def cloud_key(mock_servers: Any, key: str) -> dict[str, Any]:
    """The cloud's record of one idempotency key, with how many requests carried it."""
    response = httpx.get(f"{mock_servers.cloud_url}/v1/keys/{key}", timeout=10)
    response.raise_for_status()
    body: dict[str, Any] = response.json()
    return body


def journal_rows(conn: db.Connection, run_id: str) -> dict[str, list[dict[str, Any]]]:
    return {
        "decisions": conn.execute(
            "SELECT seq, tool, args, llm_call FROM decisions WHERE run_id = %s ORDER BY seq",
            (run_id,),
        ).fetchall(),
        "calls": conn.execute(
            "SELECT seq, idem_key, state, result, remote_status FROM tool_calls"
            " WHERE run_id = %s ORDER BY seq",
            (run_id,),
        ).fetchall(),
    }
