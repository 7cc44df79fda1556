"""The runtime behind a real PgBouncer (issue 24, point 5).

In transaction mode a client's consecutive transactions run on whichever server connection
is free, so session state does not survive between them. The runtime's only session state
is its prepared statements: a connection that finds a pooler in between prepares nothing
(``agent_runtime.store.pooling``), and a pooler that refuses transactions (statement mode) is
refused with one clear line. Two server connections serve every client here, so the
statements of one worker do hop between them.
"""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from agent_runtime.errors import EXIT_USAGE, ConfigError
from agent_runtime.store import db, pooling
from agent_runtime.store.journal import Journal

from .fix_pgbouncer import pgbouncer
from .fix_runtime import Agent, reset_journal
from .fix_supervisor import wait_for
from .test_supervisor import FAST, _all_done, _assert_each_step_once


def test_a_connection_through_pgbouncer_knows_it_and_prepares_nothing(
    database_url: str,
) -> None:
    with db.connection(database_url) as direct:
        assert not pooling.pooled(direct)
        assert direct.prepare_threshold == 0  # straight to the server: prepared statements
    with pgbouncer(database_url, "transaction") as bouncer, db.connection(bouncer.url) as conn:
        assert pooling.pooled(conn)
        assert conn.prepare_threshold is None
        for _ in range(20):  # statements hop between server connections, and all work
            db.one(conn, "serving_backend")


def test_prepared_statements_break_behind_pgbouncer_which_is_why_they_go(
    database_url: str,
) -> None:
    """The hazard is real: what a direct connection does breaks in transaction mode."""
    with pgbouncer(database_url, "transaction", pool_size=2) as bouncer:
        first = psycopg.connect(bouncer.url, autocommit=True, prepare_threshold=0)
        second = psycopg.connect(bouncer.url, autocommit=True, prepare_threshold=0)
        try:
            with pytest.raises(psycopg.Error, match="prepared statement"):
                for i in range(50):  # the two clients' transactions interleave on 2 servers
                    with second.transaction():
                        second.execute("SELECT pg_backend_pid()").fetchone()
                        first.execute("SELECT %s::int + 1", (i,)).fetchone()
                    first.execute("SELECT %s::int + 1", (i,)).fetchone()
        finally:
            first.close()
            second.close()


def test_a_pooler_that_refuses_transactions_is_refused_in_one_line(
    database_url: str, agent: Agent
) -> None:
    with pgbouncer(database_url, "statement") as bouncer:
        with pytest.raises(ConfigError, match="pool_mode = statement"):
            db.connect(bouncer.url)
        refused = agent.run("bouncer-statement", DATABASE_URL=bouncer.url)
    assert refused.code == EXIT_USAGE, refused.out
    assert "pool_mode = statement" in refused.out and "Traceback" not in refused.out


@pytest.mark.usefixtures("frozen_clock")
def test_runs_crash_resume_and_finish_through_pgbouncer_in_transaction_mode(
    database_url: str, agent: Agent, conn: Any, mock_servers: Any, supervisors: Any
) -> None:
    reset_journal(conn)
    runs = [f"bouncer-{i}" for i in range(6)]
    with pgbouncer(database_url, "transaction", pool_size=2) as bouncer:
        # a worker that dies after its intent, and one after its call, both resumed
        for run_id, point in zip(runs[:2], ("after_intent", "after_call"), strict=True):
            crashed = agent.run(run_id, DATABASE_URL=bouncer.url, CRASH_AT=point, CRASH_SEQ="1")
            assert crashed.code == 1, crashed.out
            resumed = agent.run(run_id, DATABASE_URL=bouncer.url)  # owner provably dead
            assert resumed.code == 0, resumed.out
        journal = Journal(conn)
        for run_id in runs[2:]:
            journal.create_run(run_id)
        sup = supervisors(*FAST, "--max-workers", "3", "--once", DATABASE_URL=bouncer.url)
        assert sup.wait(120) == 0, sup.text
        wait_for("every run to finish", lambda: _all_done(conn, runs))
        assert "pooler-detected" in sup.text
    for run_id in runs:
        _assert_each_step_once(conn, mock_servers, run_id)
