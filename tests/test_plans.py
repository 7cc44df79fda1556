"""A write of one call reaches it through the calls' primary key, in the plan a worker keeps.

A worker's connection prepares its statements once and keeps the generic plan the server
makes for them (psycopg prepares from the first use). A confirm that named its call only
through the fence's row (``t.run_id = owned.id``) left the planner no key to look up while
the journal was small: it scanned ``tool_calls`` in a fresh database and at a few hundred
calls, and kept scanning as the journal grew until the next ANALYZE. Checked with
``EXPLAIN EXECUTE`` of the generic plan on a journal of 400 calls (a size at which that
statement scanned): counted by the server's planner, never timed.
"""

from __future__ import annotations

import re
from typing import Any

import psycopg
import pytest
from psycopg.types.json import Jsonb

from agent_runtime.store import db
from agent_runtime.store.queries import query
from agent_runtime.store.records import Lease

from .fix_runtime import plan_nodes, run_with_intent

OTHER_RUNS = 8
STEPS_EACH = 50  # other runs' calls: 400, ten pages of tool_calls


@pytest.fixture
def lease(conn: db.Connection) -> Lease:
    """A run holding an intent at seq 0 (and a redo at seq 1), among other runs' calls."""
    lease = run_with_intent(conn, "planned", "owner-1")
    with conn.transaction():
        conn.execute(
            "INSERT INTO tool_calls (run_id, seq, idem_key, state, generation)"
            " VALUES ('planned', 1, 'planned:1', 'redo', 1)"
        )
        conn.execute(
            "INSERT INTO runs (id, status) SELECT 'other-' || r, 'done'"
            " FROM generate_series(1, %(runs)s) r",
            {"runs": OTHER_RUNS},
        )
        conn.execute(
            "INSERT INTO tool_calls (run_id, seq, idem_key, state, generation)"
            " SELECT 'other-' || r, s, 'other-' || r || ':' || s, 'confirmed', 1"
            " FROM generate_series(1, %(runs)s) r, generate_series(0, %(last)s) s",
            {"runs": OTHER_RUNS, "last": STEPS_EACH - 1},
        )
    conn.execute("ANALYZE runs, tool_calls")
    return lease


def _generic_scans(conn: db.Connection, name: str, params: dict[str, Any], table: str) -> list[str]:
    """How the plan of query ``name`` that a connection keeps (the generic plan, made
    without the parameters' values) reads ``table``: one 'node type [index]' per scan."""
    text = query(name).as_string(conn)
    order = list(dict.fromkeys(re.findall(r"%\((\w+)\)s", text)))
    for k, param in enumerate(order, start=1):
        text = text.replace(f"%({param})s", f"${k}")
    execute = psycopg.sql.SQL("EXPLAIN (FORMAT JSON) EXECUTE planned_write ({})").format(
        psycopg.sql.SQL(", ").join(psycopg.sql.Literal(params[p]) for p in order)
    )
    conn.execute("SET plan_cache_mode = force_generic_plan")
    conn.execute(psycopg.sql.SQL("PREPARE planned_write AS {}").format(psycopg.sql.SQL(text)))
    try:
        row = conn.execute(execute).fetchone()
    finally:
        conn.execute("DEALLOCATE planned_write")
        conn.execute("RESET plan_cache_mode")
    assert row is not None
    return [
        f"{n['Node Type']} [{n.get('Index Name', '')}]"
        for n in plan_nodes(row["QUERY PLAN"][0]["Plan"])
        if n.get("Relation Name") == table and "Scan" in n["Node Type"]
    ]


def _fence(lease: Lease) -> dict[str, Any]:
    return {"run": lease.run_id, "owner": lease.owner, "generation": lease.generation}


def test_a_confirm_updates_its_call_through_the_calls_key(
    conn: db.Connection, lease: Lease
) -> None:
    params = {
        **_fence(lease),
        "seq": 0,
        "result": Jsonb({"id": "i-1"}),
        "remote": "created",
        "state": "confirmed",
        "commit": "off",
    }
    assert _generic_scans(conn, "record_confirm", params, "tool_calls") == [
        "Index Scan [tool_calls_pkey]"
    ]


def test_a_redo_becomes_an_intent_through_the_calls_key(conn: db.Connection, lease: Lease) -> None:
    params = {**_fence(lease), "seq": 1, "in_flight": 15.0}
    assert _generic_scans(conn, "redo_intent", params, "tool_calls") == [
        "Index Scan [tool_calls_pkey]"
    ]


@pytest.mark.parametrize("name", ["record_send", "landing_wait"])
def test_a_send_and_the_wait_before_a_check_find_their_call_through_its_key(
    conn: db.Connection, lease: Lease, name: str
) -> None:
    params = {**_fence(lease), "seq": 0, "in_flight": 15.0}
    # record_send names an intent: migration 0011's tool_calls_in_doubt (run_id, only intents)
    # finds it by its run as well as the primary key does, and is the smaller of the two.
    (scan,) = _generic_scans(conn, name, params, "tool_calls")
    assert scan in ("Index Scan [tool_calls_pkey]", "Index Scan [tool_calls_in_doubt]")
