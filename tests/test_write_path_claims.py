"""What a claim costs the database: the sweep's plan, its order, and a lease's renewal.

The supervisor's sweep walks the claim index to its limit instead of sorting a backlog
and hands out the longest idle first; a run handed over with its claim is not read
again, an adoption reads history only where there is some, and a renewal is a HOT
update. Counted by the server (``EXPLAIN``, statements sent, update counts), never timed.
"""

from __future__ import annotations

from pathlib import Path

import psycopg

from agent_runtime.errors import EXIT_DONE
from agent_runtime.store import db
from agent_runtime.store.journal import Journal
from agent_runtime.store.queries import query
from agent_runtime.store.records import Lease, RunTask
from agent_runtime.supervisor.workerpool import run_leased
from mock_remotes import Cloud, Model

from .fix_runtime import plan_nodes
from .write_path import Counting, provisioning_worker, started_run

CLAIM_PARAMS = {"owner": "sup", "lease": 30.0, "limit": 2, "max_attempts": 10, "agents": None}


def test_the_sweep_claims_from_a_backlog_in_index_order_without_sorting_it(
    conn: db.Connection,
) -> None:
    """A supervisor with thousands of runs waiting claims a few at every sweep: the plan
    walks ``runs_claim_order`` and stops at the limit instead of sorting the backlog (only
    the claimed rows are sorted, into claim order); finished runs are not in that index at
    all. The search for runs that used up their attempts reads ``runs_attempts``, not
    every waiting run."""
    conn.execute(
        "INSERT INTO runs (id, status) SELECT 'done-' || g, 'done' FROM generate_series(1, 3000) g"
    )
    conn.execute("INSERT INTO runs (id) SELECT 'wait-' || g FROM generate_series(1, 3000) g")
    conn.execute("ANALYZE runs")
    explain = psycopg.sql.SQL("EXPLAIN (FORMAT JSON) ") + query("claim_expired")
    conn.execute("BEGIN")
    try:
        row = conn.execute(explain, CLAIM_PARAMS).fetchone()
    finally:
        conn.execute("ROLLBACK")
    assert row is not None
    nodes = list(plan_nodes(row["QUERY PLAN"][0]["Plan"]))
    sorted_keys = [key for n in nodes if n["Node Type"] == "Sort" for key in n["Sort Key"]]
    assert all(key.startswith("claimed.") for key in sorted_keys), sorted_keys  # the few claimed
    assert "runs_claim_order" in {n.get("Index Name") for n in nodes}
    give_up = psycopg.sql.SQL("EXPLAIN (FORMAT JSON) ") + query("give_up_exhausted")
    row = conn.execute(give_up, {"max_attempts": 10, "give_up_after": 300.0}).fetchone()
    assert row is not None
    scans = list(plan_nodes(row["QUERY PLAN"][0]["Plan"]))
    on_runs = [n for n in scans if n.get("Relation Name") == "runs" and "Scan" in n["Node Type"]]
    assert "Seq Scan" not in {n["Node Type"] for n in on_runs}
    assert "runs_attempts" in {n.get("Index Name") for n in scans}

    claimed = db.run(conn, "claim_expired", CLAIM_PARAMS)
    oldest = conn.execute(
        "SELECT id FROM runs WHERE id LIKE 'wait-%' ORDER BY created_at, id LIMIT 2"
    ).fetchall()
    assert sorted(r["id"] for r in claimed) == sorted(r["id"] for r in oldest)


def test_a_run_handed_over_with_its_claim_is_not_read_again(
    conn: db.Connection, tmp_path: Path
) -> None:
    """The supervisor's claim reads the run's agent and input; a pool worker given them
    adopts the lease and reads the history, but never the run row itself."""
    journal = Journal(conn)
    journal.create_run("handed", "provisioning", "three boxes, please")
    (row,) = db.run(conn, "claim_expired", {**CLAIM_PARAMS, "limit": 1})
    assert (row["agent"], row["input"]) == ("provisioning", "three boxes, please")
    lease = Lease(run_id=row["id"], owner=row["owner"], generation=row["generation"])
    with Cloud(tmp_path / "cloud.sqlite3") as cloud:
        worker = provisioning_worker(conn, Model(), cloud)
        Counting.sent.clear()
        conn.cursor_factory = Counting
        try:
            code, fit = run_leased(worker, lease, RunTask(agent=row["agent"], input=row["input"]))
        finally:
            conn.cursor_factory = psycopg.Cursor
            worker.close_clients()
    assert (code, fit) == (EXIT_DONE, True)
    assert query("get_run").as_string(conn) not in Counting.sent
    assert query("adopt_lease").as_string(conn) in Counting.sent
    assert query("load_history").as_string(conn) not in Counting.sent  # it had no steps
    assert journal.require_run("handed").status == "done"


def test_an_adoption_reads_no_history_only_where_there_is_none(conn: db.Connection) -> None:
    """A run's first worker learns from its adoption that there is nothing to read; one
    that takes a run with a decision but no call yet must read it."""
    journal = Journal(conn)
    for run_id in ("fresh", "decided"):
        journal.create_run(run_id)
    rows = {r["id"]: r for r in db.run(conn, "claim_expired", CLAIM_PARAMS)}
    leases = {
        run_id: Lease(run_id=run_id, owner=r["owner"], generation=r["generation"])
        for run_id, r in rows.items()
    }
    journal.record_decision(leases["decided"], 0, "create_server", {"name": "a"})
    fresh, history = journal.adopt(leases["fresh"], "w:1:a")
    assert fresh.owner == "w:1:a" and history is not None and not history.decisions
    decided, history = journal.adopt(leases["decided"], "w:1:b")
    assert decided.owner == "w:1:b" and history is None


def test_a_renewal_rewrites_the_run_row_in_place(conn: db.Connection) -> None:
    """A heartbeat changes only the lease's expiry, which no index holds: a HOT update,
    with no index entry written for it."""
    journal = Journal(conn)
    lease = started_run(journal, "renewed")
    counted = "SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_xact_user_tables WHERE relname = 'runs'"
    with conn.transaction():  # this backend's counts not yet flushed: compare before, after
        before = conn.execute(counted).fetchone()
        journal.renew(lease, 60.0)
        after = conn.execute(counted).fetchone()
    assert before is not None and after is not None
    assert after["n_tup_upd"] - before["n_tup_upd"] == 1
    assert after["n_tup_hot_upd"] - before["n_tup_hot_upd"] == 1


def test_the_sweep_hands_out_its_claims_longest_idle_first(conn: db.Connection) -> None:
    """The rows come in claim order, whatever the table's layout: here the run stored
    first is the one idle for the shortest time."""
    conn.execute(
        "INSERT INTO runs (id, updated_at) SELECT 'idle-' || g, cr_now() - g * interval '1 s' "
        "FROM generate_series(1, 4) g ORDER BY g"
    )
    with conn.transaction():  # a plan whose join walks the table, not the claim's order
        conn.execute("SET LOCAL enable_nestloop = off")
        claimed = db.run(conn, "claim_expired", {**CLAIM_PARAMS, "limit": 4})
    assert [r["id"] for r in claimed] == ["idle-4", "idle-3", "idle-2", "idle-1"]
