"""Broken statements made from the runtime's own: one small edit of a real query each.

A variant's statement is never a copy kept by hand (a copy drifts: the runtime's claim
gains a backoff, the copy keeps the old predicate, and the variant tests a bug nobody can
make any more). It is the runtime's statement of today with one edit, a regular
expression that must match exactly once: if the runtime's statement changed so that the
edit no longer applies, :func:`statement` says so, and ``test_variants.py`` fails.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from typing import Final

from psycopg import sql

from agent_runtime.store.queries import runtime_queries


@dataclass(frozen=True, kw_only=True)
class Edit:
    base: str  # the runtime's query
    pattern: str  # a regular expression that matches the base exactly once
    replacement: str
    why: str


_FENCE: Final = r"\s+AND owner = %\(owner\)s AND generation = %\(generation\)s"
_UNFENCED: Final = {
    f"unfenced_{name}": Edit(
        base=name,
        pattern=_FENCE,
        replacement="",
        why="the owner and generation checks dropped: any worker may write",
    )
    for name in (
        "check_owner",
        "renew_lease",
        "record_decision",
        "record_intent",
        "record_confirm",
        "finish_run",
        "fail_run",
        "release_run",
    )
}

EDITS: Final[dict[str, Edit]] = {
    **_UNFENCED,
    "flipped_claim_run": Edit(
        base="claim_run",
        pattern=r"OR lease_expires_at <= cr_now\(\)\n",
        replacement="OR lease_expires_at > cr_now()\n",
        why="the lease comparison turned round: live leases taken, expired ones left",
    ),
    "backoff_blind_claim_run": Edit(
        base="claim_run",
        pattern=r"\(owner IS NULL AND lease_expires_at IS NULL\)",
        replacement="owner IS NULL",
        why="a free run is claimable at once: its backoff after a resumable stop is ignored",
    ),
    "careless_claim_expired": Edit(
        base="claim_expired",
        pattern=r"\n\s+AND \(lease_expires_at IS NULL OR lease_expires_at <= cr_now\(\)\)",
        replacement="",
        why="the sweep's lease predicate dropped: live leases and backoffs claimed",
    ),
    "parked_claim_expired": Edit(
        base="claim_expired",
        pattern=r"WHERE status IN \('pending', 'running'\)",
        replacement="WHERE status IN ('pending', 'running', 'needs_attention')",
        why="the sweep's status list grew by one: a run parked for an operator is claimed",
    ),
    "session_relaxed_decision": Edit(
        base="record_decision",
        pattern=r"set_config\('synchronous_commit', 'off', true\)",
        replacement="set_config('synchronous_commit', 'off', false)",
        why="the decision's relaxed commit is set for the session, not the transaction",
    ),
    "overwrite_decision": Edit(
        base="record_decision",
        pattern=r"\nRETURNING seq, llm_call, decided_at$",
        replacement=(
            "\nON CONFLICT (run_id, seq) DO UPDATE"
            "\nSET tool = excluded.tool, args = excluded.args, llm_call = excluded.llm_call,"
            "\n    generation = excluded.generation, call_id = excluded.call_id,"
            "\n    decided_at = cr_now()"
            "\nRETURNING seq, llm_call, decided_at"
        ),
        why="a step decided again overwrites its decision instead of failing",
    ),
    "calls_only_adopt_lease": Edit(
        base="adopt_lease",
        pattern=r"FROM decisions d WHERE d\.run_id = c\.run_id",
        replacement="FROM tool_calls d WHERE d.run_id = c.run_id",
        why="the adoption looks for steps among the calls: a decision without an intent is missed",
    ),
    "unjoined_record_confirm": Edit(
        base="record_confirm",
        pattern=r"\nFROM owned\nWHERE t\.run_id = %\(run\)s",
        replacement="\nWHERE t.run_id = %(run)s",
        why="the confirm finds its call by key but no longer joins the fence: any worker's lands",
    ),
    "overwrite_intent": Edit(
        base="record_intent",
        pattern=r"\nRETURNING intent_at, lands_by$",
        replacement=(
            "\nON CONFLICT (run_id, seq) DO UPDATE"
            "\nSET state = 'intent', result = NULL, remote_status = NULL,"
            "\n    generation = excluded.generation, intent_at = cr_now(), confirmed_at = NULL,"
            "\n    confirm_generation = NULL, lands_by = excluded.lands_by"
            "\nRETURNING intent_at, lands_by"
        ),
        why="an intent written again overwrites the old one, confirmed or not",
    ),
}


class StatementChanged(KeyError):
    """The runtime's statement no longer has what a variant's edit changes."""


@cache
def statement(name: str) -> sql.SQL:
    """The broken statement ``name``, made from today's runtime statement."""
    edit = EDITS[name]
    base = runtime_queries().text(edit.base)
    changed, count = re.subn(edit.pattern, edit.replacement, base, flags=re.MULTILINE)
    if count != 1:
        raise StatementChanged(
            f"variant statement {name!r} edits the runtime's {edit.base!r} ({edit.why}), but "
            f"its pattern {edit.pattern!r} matches {count} times there, not once: the "
            "runtime's statement changed; make the edit fit it again"
        )
    return sql.SQL(changed)
