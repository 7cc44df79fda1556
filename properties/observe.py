"""What the suite can see at one instant: the journal, the remotes' records and answers,
and the model's call counters. One :func:`snapshot` after every event feeds every
invariant."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from agent_runtime.store import db

from . import sqlfile
from .agents import KIND_OF
from .remotes import Answer, EffectRow, Remotes

__all__ = ["KIND_OF", "CallRow", "ClaimRow", "DecisionRow", "RunRow", "Snapshot", "snapshot"]


@dataclass(frozen=True, kw_only=True)
class RunRow:
    id: str
    status: str
    owner: str | None
    generation: int
    llm_calls: int
    failure: str | None
    lease_expires_at: datetime | None = None
    attempts: int = 0  # claims since the run last made progress
    progress_at: datetime | None = None
    output: str | None = None  # the final answer's text, as the run was finished with it
    final_text: str | None = None  # the text of the answer journaled for its final decision


@dataclass(frozen=True, kw_only=True)
class DecisionRow:
    seq: int
    tool: str
    args: dict[str, Any]
    llm_call: int
    generation: int
    call_id: str | None = None  # the model's id of the call (Chat Completions)


@dataclass(frozen=True, kw_only=True)
class CallRow:
    seq: int
    key: str
    state: str
    result: dict[str, Any] | None
    remote_status: str | None
    generation: int
    confirm_generation: int | None
    effect: str = "keyed"  # the tool's contract, journaled with the intent
    sends: int = 1  # attempts journaled as sent (the intent's, each re-send's, a redo's)


@dataclass(frozen=True, kw_only=True)
class ClaimRow:
    run: str
    generation: int
    owner: str
    previous_owner: str | None
    lapsed: bool | None  # the previous lease had run out when it was claimed
    reason: str | None


@dataclass(frozen=True, kw_only=True)
class Snapshot:
    runs: dict[str, RunRow]
    decisions: dict[str, dict[int, DecisionRow]]
    calls: dict[str, dict[int, CallRow]]
    effects: list[EffectRow]  # every record the remotes hold: resources, tickets, emails
    model_calls: dict[str, int]
    answers: list[Answer]
    claims: list[ClaimRow] = field(default_factory=list)
    # each journaled model answer's tool call ids, by run and llm_call
    answers_by_run: dict[str, dict[int, list[str]]] = field(default_factory=dict)

    def effects_of(self, run: str) -> list[EffectRow]:
        return [row for row in self.effects if row.run == run]


def snapshot(conn: db.Connection, remotes: Remotes) -> Snapshot:
    runs: dict[str, RunRow] = {}
    decisions: dict[str, dict[int, DecisionRow]] = {}
    calls: dict[str, dict[int, CallRow]] = {}
    claims: list[ClaimRow] = []
    answers_by_run: dict[str, dict[int, list[str]]] = {}
    for r in sqlfile.rows(conn, "snapshot"):
        run = r["id"]
        runs[run] = RunRow(
            id=run,
            status=r["status"],
            owner=r["owner"],
            generation=r["generation"],
            llm_calls=r["llm_calls"],
            failure=r["failure"],
            lease_expires_at=r["lease_expires_at"],
            attempts=r["attempts"],
            progress_at=r["progress_at"],
            output=r["output"],
            final_text=r["final_text"],
        )
        decisions[run] = {
            seq: DecisionRow(
                seq=seq, tool=tool, args=args, llm_call=llm_call, generation=gen, call_id=cid
            )
            for seq, tool, args, llm_call, gen, cid in r["decisions"]
        }
        answers_by_run[run] = {llm_call: ids for llm_call, ids in r["answers"]}
        calls[run] = {
            seq: CallRow(
                seq=seq,
                key=key,
                state=state,
                result=result,
                remote_status=remote,
                generation=gen,
                confirm_generation=confirm_gen,
                effect=effect,
                sends=sends,
            )
            for seq, key, state, result, remote, gen, confirm_gen, effect, sends in r["calls"]
        }
        claims += [
            ClaimRow(run=run, generation=g, owner=o, previous_owner=p, lapsed=lapsed, reason=why)
            for g, o, p, lapsed, why in r["claims"]
        ]
    return Snapshot(
        runs=runs,
        decisions=decisions,
        calls=calls,
        effects=remotes.effects(),
        model_calls=remotes.all_model_calls(),
        answers=remotes.answers(),
        claims=claims,
        answers_by_run=answers_by_run,
    )
