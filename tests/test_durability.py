"""The confirm is committed without waiting for the WAL flush; the run still settles
after the database itself restarts, whatever the restart kept."""

from __future__ import annotations

from typing import Any

from agent_runtime.store import db

from .fix_runtime import Agent, journal_rows


def test_a_run_settles_after_an_immediate_database_restart(
    agent: Agent, pg_cluster: Any, mock_servers: Any
) -> None:
    first = agent.run("pg-restart", CRASH_AT="after_confirm", CRASH_SEQ="1")
    assert first.code == 1, first.out
    pg_cluster.stop(mode="immediate")  # no checkpoint, no flush: like a power cut for PG
    pg_cluster.ensure_running()
    second = agent.run("pg-restart")
    assert second.code == 0, second.out
    resources = mock_servers.resources("pg-restart")
    assert resources["counts"] == {"servers": 1, "databases": 1, "dns_records": 1}
    with db.connection(agent.database_url) as conn:
        calls = journal_rows(conn, "pg-restart")["calls"]
    assert [c["state"] for c in calls] == ["confirmed"] * 3


def test_a_lost_confirm_costs_one_resend_answered_already_done(
    agent: Agent, conn: Any, mock_servers: Any
) -> None:
    first = agent.run("lost-confirm", CRASH_AT="after_confirm", CRASH_SEQ="1")
    assert first.code == 1, first.out
    # What the journal looks like if the relaxed commit of that confirm did not survive.
    conn.execute(
        "UPDATE tool_calls SET state = 'intent', result = NULL, remote_status = NULL,"
        " confirmed_at = NULL, confirm_generation = NULL"
        " WHERE run_id = 'lost-confirm' AND seq = 1"
    )
    second = agent.run("lost-confirm")
    assert second.code == 0, second.out
    assert "resending run=lost-confirm seq=1" in second.out
    confirmed = [ln for ln in second.lines("confirmed") if "seq=1" in ln]
    assert confirmed and "remote=already_done" in confirmed[0]
    assert mock_servers.resources("lost-confirm")["total"] == 3
