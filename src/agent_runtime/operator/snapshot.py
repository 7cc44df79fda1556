"""What the operator reads: the list of runs, and one run's journal from a single snapshot.

``runs``, ``decisions``, ``tool_calls``, ``run_claims``, ``run_retries`` and
``call_resolutions`` of one run
are read in one REPEATABLE READ transaction and judged against the ``cr_now()``
returned with the run row, the clock the leases use, so "expired" and "expires" agree
with what a claim would do at that instant. Nothing here writes.
"""

from __future__ import annotations

import psycopg

from agent_runtime.loop.lease import owner_is_dead
from agent_runtime.store import db
from agent_runtime.store.records import Decision, Run, ToolCall

from ..errors import RunNotFound
from .attention import PastResolution
from .history import assemble
from .views import Claim, PastRetry, RunHistory, RunList, RunSummary

STATUSES = ("pending", "running", "done", "failed", "cancelled", "needs_attention")
DEFAULT_LIMIT = 100  # runs listed by `runs` unless --limit says otherwise
APPLICATION = "agent_runtime.operator"  # application_name of the operator's connections


def list_runs(
    conn: db.Connection,
    *,
    statuses: list[str] | None = None,
    in_doubt: bool = False,
    limit: int | None = DEFAULT_LIMIT,
) -> RunList:
    """Runs matching the filters, most recently active first."""
    rows = db.run(
        conn,
        "operator_list_runs",
        {"statuses": statuses or None, "in_doubt": in_doubt, "limit": limit},
    )
    runs = [RunSummary.from_row(r) for r in rows]
    return RunList(
        runs=runs,
        total=int(rows[0]["total"]) if rows else 0,
        now=runs[0].now if runs else None,
    )


def read_history(conn: db.Connection, run_id: str) -> RunHistory:
    """Read one run from a single snapshot and judge it; RunNotFound if there is none."""
    previous = conn.isolation_level
    conn.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
    try:
        with conn.transaction():
            row = db.one(conn, "get_run", {"run": run_id})
            if row is None:
                raise RunNotFound(f"no run with id {run_id!r}")
            run = Run.from_row(row)
            params = {"run": run_id}
            decisions = [Decision.from_row(r) for r in db.run(conn, "load_decisions", params)]
            calls = [ToolCall.from_row(r) for r in db.run(conn, "load_tool_calls", params)]
            claims = [Claim.from_row(r) for r in db.run(conn, "operator_load_claims", params)]
            retries = [PastRetry.from_row(r) for r in db.run(conn, "operator_load_retries", params)]
            resolutions = [
                PastResolution.from_row(r)
                for r in db.run(conn, "operator_load_resolutions", params)
            ]
    finally:
        conn.isolation_level = previous
    gone = run.status == "running" and run.lease_live and owner_is_dead(run.owner)
    return assemble(
        run, decisions, calls, claims, owner_gone=gone, retries=retries, resolutions=resolutions
    )
