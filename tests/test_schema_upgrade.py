"""A database made by an older version gets the new schema on first use, data kept."""

from __future__ import annotations

from typing import Any

from agent_runtime import db
from agent_runtime.journal import Journal

from .fix_runtime import run_with_intent


def test_an_older_schema_is_upgraded_in_place_and_keeps_its_runs(conn: Any) -> None:
    Journal(conn).create_run("from-before")
    conn.execute("ALTER TABLE cr_clock DROP COLUMN frozen_at CASCADE")
    conn.execute("COMMENT ON TABLE runs IS NULL")
    assert not db.has_schema(conn)
    db.ensure_schema(conn)
    assert db.has_schema(conn)
    assert conn.execute("SELECT frozen_at FROM cr_clock").fetchone() == {"frozen_at": None}
    assert Journal(conn).require_run("from-before").status == "pending"


def test_the_schema_says_the_version_the_code_expects() -> None:
    assert f"COMMENT ON TABLE runs IS '{db.SCHEMA_VERSION}';" in db.schema_text()


STEP_KEYS = """
SELECT conrelid::regclass::text AS tab, conname FROM pg_constraint
WHERE conrelid IN ('model_answers'::regclass, 'decisions'::regclass, 'tool_calls'::regclass)
  AND contype IN ('f', 'u')
ORDER BY 1, 2
"""


def test_a_schema_5_database_loses_its_step_keys_and_keeps_its_steps(conn: Any) -> None:
    journal = Journal(conn)
    run_with_intent(conn, "from-5")
    # what schema 5 had: a key from each step table to its parent, and idem_key unique
    for statement in (
        "ALTER TABLE model_answers ADD CONSTRAINT model_answers_run_id_fkey"
        " FOREIGN KEY (run_id) REFERENCES runs (id) ON DELETE CASCADE",
        "ALTER TABLE decisions ADD CONSTRAINT decisions_run_id_fkey"
        " FOREIGN KEY (run_id) REFERENCES runs (id) ON DELETE CASCADE",
        "ALTER TABLE tool_calls ADD CONSTRAINT tool_calls_run_id_seq_fkey"
        " FOREIGN KEY (run_id, seq) REFERENCES decisions (run_id, seq) ON DELETE CASCADE",
        "ALTER TABLE tool_calls ADD CONSTRAINT tool_calls_idem_key_key UNIQUE (idem_key)",
        "COMMENT ON TABLE runs IS 'crashresume schema 5'",
    ):
        conn.execute(statement, prepare=False)
    assert len(conn.execute(STEP_KEYS).fetchall()) == 4
    assert not db.has_schema(conn)

    db.ensure_schema(conn)

    assert db.has_schema(conn)
    assert conn.execute(STEP_KEYS).fetchall() == []
    history = journal.history("from-5")
    assert history.decisions[0].tool == "create_server" and history.calls[0].state == "intent"


def test_a_schema_6_database_gets_schema_7s_indexes_on_runs(conn: Any) -> None:
    conn.execute("DROP INDEX runs_claim_order")
    conn.execute("DROP INDEX runs_attempts")
    conn.execute(  # schema 6's, which schema 7 drops
        "CREATE INDEX runs_claimable ON runs (lease_expires_at) "
        "WHERE status IN ('pending', 'running')"
    )
    conn.execute("COMMENT ON TABLE runs IS 'crashresume schema 6'")
    assert not db.has_schema(conn)
    db.ensure_schema(conn)
    assert db.has_schema(conn)
    found = conn.execute(
        "SELECT indexrelid::regclass::text AS name FROM pg_index "
        "WHERE indrelid = 'runs'::regclass ORDER BY 1"
    ).fetchall()
    assert [r["name"] for r in found] == [
        "runs_activity",  # schema 10's (it replaced runs_attention)
        "runs_agent_waiting",  # schema 10's
        "runs_attempts",
        "runs_claim_order",
        "runs_pkey",
    ]


def test_a_schema_8_database_learns_the_rejected_status_of_a_refused_call(conn: Any) -> None:
    journal = Journal(conn)
    journal.create_run("from-8")
    conn.execute("ALTER TABLE tool_calls DROP CONSTRAINT tool_calls_remote_status_check")
    conn.execute(  # schema 8's list
        "ALTER TABLE tool_calls ADD CONSTRAINT tool_calls_remote_status_check CHECK"
        " (remote_status IN ('created', 'already_done', 'found', 'read', 'operator', 'failed'))"
    )
    conn.execute("COMMENT ON TABLE runs IS 'crashresume schema 8'")
    assert not db.has_schema(conn)

    db.ensure_schema(conn)

    assert db.has_schema(conn)
    lease = journal.claim("from-8", "w", 60.0)
    assert lease is not None
    error = {"error": "UnknownTool", "message": "no such tool"}
    journal.record_answer(lease, 0, [("weigh", {}, "c0")], message={}, rejected={0: error})
    call = journal.history("from-8").calls[0]
    assert (call.state, call.remote_status, call.result, call.sends) == (
        "failed",
        "rejected",
        error,
        0,
    )


def test_a_schema_9_database_gets_schema_10s_indexes(conn: Any) -> None:
    conn.execute("DROP INDEX runs_activity")
    conn.execute("DROP INDEX runs_agent_waiting")
    conn.execute("DROP INDEX tool_calls_in_doubt")
    conn.execute(  # schema 9's, which schema 10 drops
        "CREATE INDEX runs_attention ON runs (updated_at) WHERE status = 'needs_attention'"
    )
    conn.execute("COMMENT ON TABLE runs IS 'crashresume schema 9'")
    assert not db.has_schema(conn)
    db.ensure_schema(conn)
    assert db.has_schema(conn)
    found = conn.execute(
        "SELECT indexrelid::regclass::text AS name FROM pg_index "
        "WHERE indrelid IN ('runs'::regclass, 'tool_calls'::regclass) ORDER BY 1"
    ).fetchall()
    names = {r["name"] for r in found}
    assert {"runs_activity", "runs_agent_waiting", "tool_calls_in_doubt"} <= names
    assert "runs_attention" not in names
