"""What a step costs the database in commits: one WAL flush, and the run row left alone.

The decision commits without waiting and the intent, which the call goes out after,
waits; a step rewrites the run row only for a new answer, the first progress, or once a
minute for its activity. Counted by the server itself (``pg_stat_wal``, the row's
version), never timed: speed figures belong in ``bench/``.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest
from psycopg.conninfo import make_conninfo

from agent_runtime.operator.cursor import FIRST_PAGE
from agent_runtime.operator.snapshot import STATUSES
from agent_runtime.store import clock, db
from agent_runtime.store.journal import Journal
from mock_remotes import Cloud, Model

from .write_path import STEPS, provisioning_worker, started_run

RUNS = 6
# Durable commits of a run besides its steps: create, claim, finish.
FIXED = 3


@pytest.fixture
def meter(database_url: str) -> Iterator[db.Connection]:
    """A connection to another database of the same server, to read the counters from
    (reading them there counts no transaction here)."""
    with db.connection(make_conninfo(database_url, dbname="postgres")) as c:
        yield c


def _published(conn: db.Connection) -> None:
    conn.execute("SELECT pg_stat_force_next_flush()")


def _wal_syncs(meter: db.Connection, *flush: db.Connection) -> int:
    for conn in flush:
        _published(conn)
    row = meter.execute("SELECT wal_sync FROM pg_stat_wal").fetchone()
    assert row is not None
    return int(row["wal_sync"])


def test_a_step_waits_for_one_wal_flush(
    conn: db.Connection, meter: db.Connection, tmp_path: Path
) -> None:
    with Cloud(tmp_path / "cloud.sqlite3") as cloud:
        worker = provisioning_worker(conn, Model(), cloud)
        worker.run("warm")
        before = _wal_syncs(meter, conn)
        for i in range(RUNS):
            assert worker.run(f"flush-{i}").steps == STEPS
        syncs = _wal_syncs(meter, conn) - before
        worker.close_clients()
    per_step = (syncs / RUNS - FIXED) / STEPS
    # One flush a step is the intent's (it flushes the decision before it). The WAL writer
    # flushing a relaxed commit on its own now and then may add a little; two a step (a
    # durable decision and a durable intent) may not.
    assert 0.9 <= per_step <= 1.4, f"{syncs} WAL flushes in {RUNS} runs: {per_step:.2f} a step"


def _commit_setting(conn: db.Connection) -> str:
    row = conn.execute("SHOW synchronous_commit").fetchone()
    assert row is not None
    return str(row["synchronous_commit"])


def test_the_decision_commits_without_waiting_and_what_acts_on_it_waits(
    conn: db.Connection,
) -> None:
    journal = Journal(conn)
    lease = started_run(journal, "commits")
    seen: dict[str, str] = {}
    with conn.transaction():
        journal.record_decision(lease, 0, "create_server", {"name": "srv-1"})
        seen["decision"] = _commit_setting(conn)
    with conn.transaction():
        keyed = journal.record_intent(lease, 0, "keyed")
        seen["intent"] = _commit_setting(conn)
    with conn.transaction():
        journal.record_confirm(lease, keyed, {"id": "i-1"}, "created")
        seen["keyed confirm"] = _commit_setting(conn)
    journal.record_decision(lease, 1, "send_email", {"to": "a@example.test"})
    once = journal.record_intent(lease, 1, "once")
    with conn.transaction():
        journal.record_confirm(lease, once, {"id": "m-1"}, "created")
        seen["once confirm"] = _commit_setting(conn)
    assert seen == {
        "decision": "off",  # the intent's durable commit flushes it
        "intent": "on",  # the call goes out after it
        "keyed confirm": "off",  # lost: one re-send answered already_done
        "once confirm": "on",  # lost, it would park a run whose call was done
    }
    assert _commit_setting(conn) == "on"  # SET LOCAL: the session keeps its own


def _row_version(conn: db.Connection, run_id: str) -> tuple[str, str]:
    row = conn.execute(
        "SELECT xmin::text AS xmin, ctid::text AS ctid FROM runs WHERE id = %(run)s",
        {"run": run_id},
    ).fetchone()
    assert row is not None
    return row["xmin"], row["ctid"]


def test_only_a_new_answer_and_the_first_progress_rewrite_the_run_row(
    conn: db.Connection,
) -> None:
    journal = Journal(conn)
    lease = started_run(journal, "quiet")
    journal.record_decision(lease, 0, "create_server", {"name": "srv-1"})
    first = journal.record_intent(lease, 0)
    journal.record_confirm(lease, first, {"id": "i-1"}, "created")  # progress since the claim
    run = journal.require_run("quiet")
    assert (run.attempts, run.llm_calls) == (0, 1)
    journal.record_decision(lease, 1, "create_database", {"name": "db-1"})
    answered = _row_version(conn, "quiet")
    second = journal.record_intent(lease, 1)
    assert _row_version(conn, "quiet") == answered  # locked while written, not rewritten
    journal.record_confirm(lease, second, {"id": "d-1"}, "created")
    assert _row_version(conn, "quiet") == answered  # attempts already 0: nothing to write
    assert journal.require_run("quiet").llm_calls == 2


@pytest.mark.usefixtures("frozen_clock")
def test_a_step_refreshes_the_runs_activity_at_most_once_a_minute(conn: db.Connection) -> None:
    """runs.updated_at orders `runs` (migration 0011). A decision within a minute of the run
    row's last change (here the first confirm after the claim, which writes progress)
    leaves it as it was, so the step's update stays HOT; one a minute later moves it. The
    list shows the latest intent or confirm either way."""
    journal = Journal(conn)
    lease = started_run(journal, "active")

    def step(seq: int) -> datetime:
        journal.record_decision(lease, seq, "create_server", {"name": f"srv-{seq}"})
        call = journal.record_intent(lease, seq)
        confirmed = journal.record_confirm(lease, call, {"id": seq}, "created").confirmed_at
        assert confirmed is not None
        return confirmed

    progressed = step(0)
    clock.advance(conn, 30.0)
    second = step(1)
    assert journal.require_run("active").updated_at == progressed  # the row's index keys stay
    params = {"statuses": list(STATUSES), "agent": None, "limit": None, **FIRST_PAGE}
    (listed,) = db.run(conn, "operator_list_runs", params)
    assert (listed["activity"], listed["updated_at"]) == (progressed, second)
    clock.advance(conn, 60.0)
    third = step(2)
    assert journal.require_run("active").updated_at == third  # the clock stands still
    (listed,) = db.run(conn, "operator_list_runs", params)
    assert listed["activity"] == listed["updated_at"] == third
