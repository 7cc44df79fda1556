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
from .cursor import FIRST_PAGE, Cursor
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
    after: Cursor | None = None,
    agent: str | None = None,
) -> RunList:
    """A page of the runs matching the filters, most recently active first, starting after
    ``after`` (the previous page's ``next``), of ``agent`` only when given; ``next`` is set
    when more runs follow.
    Reads one index range per status (``operator_list_runs``), never the whole journal."""
    params = {
        "statuses": statuses or list(STATUSES),
        "agent": agent,
        "limit": None if limit is None else limit + 1,  # one more: does a next page exist?
        **(after.params() if after is not None else FIRST_PAGE),
    }
    name = "operator_list_in_doubt" if in_doubt else "operator_list_runs"
    rows = db.run(conn, name, params)
    more = limit is not None and len(rows) > limit
    rows = rows[:limit] if more else rows
    runs = [RunSummary.from_row(r) for r in rows]
    last = rows[-1] if more else None
    return RunList(
        runs=runs,
        next=Cursor(activity=last["activity"], run_id=last["id"]).encode() if last else None,
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
