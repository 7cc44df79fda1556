"""A page of ``runs``, a claim and a prune batch read through indexes in their own order.

Issue 24: the operator's reads and the supervisor's claims must cost the same in a journal
of ten thousand runs or a million. A plan that walks an index in the order asked for and
stops at the limit does; one that scans a table, or sorts every matching run before the
limit applies, grows with the journal. Checked with ``EXPLAIN`` on a journal filled by SQL
(3,000 final runs of 5 calls each beside a few hundred live ones, analyzed: a size at which
a scan and sort of everything looks cheap enough to tempt the planner without the
indexes), counted by the planner, never timed (the timings are ``bench/bench_scale.py``'s).
"""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from agent_runtime.operator.cursor import FIRST_PAGE
from agent_runtime.operator.snapshot import STATUSES
from agent_runtime.store import db
from agent_runtime.store.queries import query

from .fix_runtime import plan_nodes
from .test_plans import _generic_scans

FINAL_RUNS = 3000
STEPS = 5
LIVE_RUNS = 300  # pending, running (some with an intent in doubt), needs_attention


@pytest.fixture
def journal(conn: db.Connection) -> db.Connection:
    with conn.transaction():
        conn.execute(
            "INSERT INTO runs (id, status, updated_at, generation)"
            " SELECT 'old-' || g, (ARRAY['done', 'failed', 'cancelled'])[1 + g %% 3],"
            "        cr_now() - make_interval(mins => g), 1"
            " FROM generate_series(1, %(n)s) g",
            {"n": FINAL_RUNS},
        )
        conn.execute(
            "INSERT INTO runs (id, status, owner, generation, lease_expires_at)"
            " SELECT 'live-' || g, (ARRAY['pending', 'running', 'needs_attention'])[1 + g %% 3],"
            "        CASE WHEN g %% 3 = 1 THEN 'w' END, 1,"
            "        CASE WHEN g %% 3 = 1 THEN cr_now() + interval '1 minute' END"
            " FROM generate_series(1, %(n)s) g",
            {"n": LIVE_RUNS},
        )
        conn.execute(
            "INSERT INTO tool_calls (run_id, seq, idem_key, state, generation)"
            " SELECT r.id, s, r.id || ':' || s,"
            "        CASE WHEN r.status <> 'done' AND s = %(last)s AND r.id LIKE 'live-%%'"
            "             THEN 'intent' ELSE 'confirmed' END, 1"
            " FROM runs r, generate_series(0, %(last)s) s",
            {"last": STEPS - 1},
        )
    conn.execute("ANALYZE runs, tool_calls")
    return conn


def _plan(conn: db.Connection, name: str, params: dict[str, Any]) -> list[dict[str, Any]]:
    explain = psycopg.sql.SQL("EXPLAIN (FORMAT JSON) ") + query(name)
    conn.execute("BEGIN")
    try:
        row = conn.execute(explain, params).fetchone()
    finally:
        conn.execute("ROLLBACK")
    assert row is not None
    return list(plan_nodes(row["QUERY PLAN"][0]["Plan"]))


def _scans(nodes: list[dict[str, Any]], table: str) -> set[str]:
    return {
        f"{n['Node Type']} [{n.get('Index Name', '')}]"
        for n in nodes
        if n.get("Relation Name") == table and "Scan" in n["Node Type"]
    }


def _never_scanned_whole(nodes: list[dict[str, Any]]) -> None:
    for table in ("runs", "tool_calls"):
        assert not any(s.startswith("Seq Scan") for s in _scans(nodes, table)), (table, nodes)


PAGES = [
    pytest.param(list(STATUSES), FIRST_PAGE, id="every-status"),
    *(pytest.param([s], FIRST_PAGE, id=s) for s in STATUSES),
    pytest.param(["needs_attention", "failed"], FIRST_PAGE, id="two-statuses"),
    pytest.param(
        list(STATUSES), {"after_at": "2020-01-01T00:00:00+00", "after_id": "old-7"}, id="after"
    ),
]


@pytest.mark.parametrize(("statuses", "after"), PAGES)
def test_a_page_of_runs_reads_one_index_range_per_status_cut_at_the_limit(
    journal: db.Connection, statuses: list[str], after: dict[str, Any]
) -> None:
    nodes = _plan(
        journal, "operator_list_runs", {"statuses": statuses, "agent": None, "limit": 21, **after}
    )
    _never_scanned_whole(nodes)
    assert "Index Scan [runs_activity]" in _scans(nodes, "runs")
    # The only sort is the merge of the per-status pages: below it, a limit per status.
    for sort in (n for n in nodes if n["Node Type"] == "Sort"):
        below = list(plan_nodes(sort))
        assert any(n["Node Type"] == "Limit" for n in below[1:]), sort


@pytest.mark.parametrize("statuses", [list(STATUSES), ["needs_attention"]])
def test_the_runs_in_doubt_are_found_from_their_calls_in_doubt(
    journal: db.Connection, statuses: list[str]
) -> None:
    nodes = _plan(
        journal,
        "operator_list_in_doubt",
        {"statuses": statuses, "agent": None, "limit": 21, **FIRST_PAGE},
    )
    _never_scanned_whole(nodes)
    assert "tool_calls_in_doubt" in {n.get("Index Name") for n in nodes}
    assert "runs_pkey" in {n.get("Index Name") for n in nodes}  # each run by its key


def test_a_claim_of_one_run_and_a_prune_batch_read_by_key(journal: db.Connection) -> None:
    claim = {
        "run": "live-3",
        "owner": "w2",
        "lease": 30.0,
        "dead_owner": None,
        "dead_generation": None,
        "forced": False,
    }
    assert _scans(_plan(journal, "claim_run", claim), "runs") == {"Index Scan [runs_pkey]"}
    batch = {"status": "done", "age": 3600.0, "batch": 500}
    nodes = _plan(journal, "prune_batch", batch)
    _never_scanned_whole(nodes)
    # the final runs of that status older than the cutoff, through runs_activity (walked
    # backwards, or a bitmap of that range when the planner finds it small), never all runs
    assert "runs_activity" in {n.get("Index Name") for n in nodes}
    # and in the plan a supervisor's connection keeps (the generic one), too
    generic = _generic_scans(journal, "prune_batch", batch, "runs")
    assert "Index Scan [runs_activity]" in generic and "Seq Scan []" not in generic


def test_the_sweeps_look_for_unserved_runs_probes_each_agent_not_each_run(
    journal: db.Connection,
) -> None:
    """A backlog of the supervisor's own agent is one index probe of unserved_runs, not a
    read of every waiting run to find the few of other agents."""
    journal.execute(
        "INSERT INTO runs (id, agent) SELECT 'mine-' || g, 'provisioning'"
        " FROM generate_series(1, 3000) g"
    )
    journal.execute("INSERT INTO runs (id, agent) VALUES ('theirs', 'support')")
    journal.execute("ANALYZE runs")
    params = {"agents": ["provisioning"], "after": 0.0, "limit": 100}
    nodes = _plan(journal, "unserved_runs", params)
    _never_scanned_whole(nodes)
    assert "runs_agent_waiting" in {n.get("Index Name") for n in nodes}
    assert [r["id"] for r in db.run(journal, "unserved_runs", params)] == ["theirs"]
