"""Retention: ``prune`` removes old final runs with everything journaled for them, in short
batches, beside live runs it never touches and workers it never makes wait (issue 24)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator

import pytest

from agent_runtime import config
from agent_runtime.errors import EXIT_USAGE, ConfigError
from agent_runtime.operator import cancel_run
from agent_runtime.store import clock, db
from agent_runtime.store.journal import Journal
from agent_runtime.store.prune import FINAL, PruneTimer, prune
from agent_runtime.store.records import Lease

from .operator_cli import cli

DAY = 86400.0  # seconds
STEP_TABLES = ("runs", "model_answers", "decisions", "tool_calls", "run_claims")
ALL_TABLES = (*STEP_TABLES, "run_retries", "call_resolutions")


def _stepped(journal: Journal, run_id: str, steps: int = 2) -> Lease:
    """A claimed run with ``steps`` confirmed calls (answers, decisions, calls, a claim)."""
    journal.create_run(run_id)
    lease = journal.claim(run_id, "w", 600.0)
    assert lease is not None
    for seq in range(steps):
        journal.record_decision(lease, seq, "create_server", {"name": f"srv-{seq}"})
        journal.record_confirm(lease, journal.record_intent(lease, seq), {"id": seq}, "created")
    return lease


def _rows_of(conn: db.Connection, run_id: str) -> dict[str, int]:
    """How many rows each table keyed by run holds for ``run_id``."""
    counts = {}
    for table in ALL_TABLES:
        row = conn.execute(_COUNT[table], (run_id,)).fetchone()
        assert row is not None
        counts[table] = row["n"]
    return counts


_COUNT = {
    "runs": "SELECT count(*) AS n FROM runs WHERE id = %s",
    "model_answers": "SELECT count(*) AS n FROM model_answers WHERE run_id = %s",
    "decisions": "SELECT count(*) AS n FROM decisions WHERE run_id = %s",
    "tool_calls": "SELECT count(*) AS n FROM tool_calls WHERE run_id = %s",
    "run_claims": "SELECT count(*) AS n FROM run_claims WHERE run_id = %s",
    "run_retries": "SELECT count(*) AS n FROM run_retries WHERE run_id = %s",
    "call_resolutions": "SELECT count(*) AS n FROM call_resolutions WHERE run_id = %s",
}


@pytest.fixture
def journal(conn: db.Connection, frozen_clock: object) -> Iterator[Journal]:
    """Old runs of every status (a month ago), then new ones: a journal in use."""
    journal = Journal(conn)
    journal.finish(_stepped(journal, "old-done"))
    journal.fail(_stepped(journal, "old-failed"), "gave up")
    cancel_run(conn, _stepped(journal, "old-cancelled").run_id, "not needed")
    _stepped(journal, "old-running")  # a worker holds it, for a month now
    journal.create_run("old-pending")  # never claimed
    journal.park(_stepped(journal, "old-parked"), "a call in doubt")
    clock.advance(conn, 30 * DAY)
    journal.finish(_stepped(journal, "new-done"))
    yield journal


def test_prune_removes_old_final_runs_with_all_their_rows_and_nothing_else(
    conn: db.Connection, journal: Journal
) -> None:
    before = {r["id"]: _rows_of(conn, r["id"]) for r in conn.execute("SELECT id FROM runs")}
    assert before["old-done"]["tool_calls"] == 2 and before["old-done"]["run_claims"] == 1

    assert prune(conn, {"done": 7 * DAY}) == {"done": 1}

    assert _rows_of(conn, "old-done") == dict.fromkeys(ALL_TABLES, 0)
    for run_id, rows in before.items():
        if run_id != "old-done":
            assert _rows_of(conn, run_id) == rows, run_id  # new-done too: it is recent
    assert prune(conn, dict.fromkeys(FINAL, 7 * DAY)) == {"done": 0, "failed": 1, "cancelled": 1}
    left = {r["id"] for r in conn.execute("SELECT id FROM runs")}
    assert left == {"old-running", "old-pending", "old-parked", "new-done"}
    with pytest.raises(ValueError, match="only final runs"):
        prune(conn, {"running": 7 * DAY})


def test_prune_goes_in_batches_and_never_holds_what_a_worker_waits_for(
    conn: db.Connection, journal: Journal, database_url: str
) -> None:
    for k in range(5):
        journal.finish(_stepped(journal, f"older-{k}", steps=1))
    clock.advance(conn, 30 * DAY)
    worker = journal.claim("old-pending", "w2", 600.0)  # a live run beside the prune
    assert worker is not None
    with db.connection(database_url) as other:
        other.execute("BEGIN")  # a batch left open: its locks held
        held = db.run(other, "prune_batch", {"status": "done", "age": DAY, "batch": 2})
        assert len(held) == 2
        conn.execute("SET lock_timeout = '2s'")  # a wait would fail the test, not hang it
        try:
            journal.record_decision(worker, 0, "create_server", {"name": "srv-0"})
            journal.record_confirm(worker, journal.record_intent(worker, 0), {"id": 0}, "created")
            # a second pruner skips the rows the first holds instead of waiting for them
            removed = prune(conn, {"done": DAY}, batch=2)
        finally:
            conn.execute("RESET lock_timeout")
        other.execute("COMMIT")
    assert removed == {"done": 5}  # old-done, new-done and older-*: 7, 2 held by the other
    assert {r["id"] for r in conn.execute("SELECT id FROM runs WHERE status = 'done'")} == set()
    assert journal.require_run("old-pending").status == "running"


def test_a_supervisor_prunes_what_prune_after_says_at_most_once_a_period(
    conn: db.Connection, journal: Journal
) -> None:
    timer = PruneTimer(after=7 * DAY, every=3600.0)
    assert timer.maybe_prune(conn) == {"done": 1, "failed": 1, "cancelled": 1}
    clock.advance(conn, 30 * DAY)  # new-done is old now, but the period has not passed
    assert timer.maybe_prune(conn) == {}
    assert PruneTimer(after=None).maybe_prune(conn) == {}
    assert config.from_env({"PRUNE_AFTER": "30d"}).prune_after == 30 * DAY
    with pytest.raises(ConfigError, match="PRUNE_AFTER '30 days' is not a duration"):
        config.from_env({"PRUNE_AFTER": "30 days"})


def test_the_prune_command_says_what_it_removed_and_refuses_a_bad_duration(
    conn: db.Connection, journal: Journal, database_url: str
) -> None:
    done = cli(database_url, "prune", "--done-before", "1w", "--cancelled-before", "1d12h")
    assert done.code == 0, done.stderr
    assert (
        done.stdout.strip()
        == "pruned 2 runs: 1 done (older than 1w), 1 cancelled (older than 1d12h)"
    )
    for args in (["--failed-before", "3x"], ["--done-before=-1d"], []):
        bad = cli(database_url, "prune", *args)
        assert bad.code == EXIT_USAGE and bad.stdout == "", bad
        (line,) = bad.stderr.splitlines()
        assert "Traceback" not in line and ("not a duration" in line or "at least one" in line)
    assert journal.require_run("old-failed").status == "failed"
    supervisor = subprocess.run(
        [sys.executable, "-m", "agent_runtime.supervisor", "--prune-after", "3x"],
        env={**os.environ, "DATABASE_URL": database_url},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert supervisor.returncode == EXIT_USAGE
    (line,) = supervisor.stderr.splitlines()
    assert "--prune-after '3x' is not a duration" in line
