"""Deliberately broken runtimes: the suite must catch every one of them.

Each variant removes one guarantee of the protocol (DESIGN.md sections 3 and 5)
by subclassing :class:`~agent_runtime.journal.Journal` or
:class:`~agent_runtime.worker.Worker`; the queries they need are in
``variants.sql``. ``tests`` in ``test_variants.py`` run the ``ci`` profile
against each and require a shrunk failing schedule.

=======================  ==================================================================
variant                  what is broken
=======================  ==================================================================
``no_decision_replay``   a restart does not read back decisions that were not acted on:
                         the model is asked again and its new answer overwrites the old
``fresh_key``            a stranded intent is re-sent under a new idempotency key
                         (``<run>:<seq>~<generation>``), so the cloud cannot recognise it
``no_intent_resolution`` a restart ignores intents without a confirm: it assumes the call
                         went through and carries on with the next step
``no_fencing``           journal writes check the run, not the owner and generation: a
                         worker that lost its lease keeps writing
``confirm_before_call``  the confirm is written before the cloud is called (the result is
                         patched in afterwards)
=======================  ==================================================================
"""

from __future__ import annotations

import dataclasses
import logging
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, Final

import psycopg
from psycopg import sql
from psycopg.types.json import Jsonb

from agent_runtime import db
from agent_runtime.errors import DatabaseError, LeaseLost
from agent_runtime.journal import Journal
from agent_runtime.records import Decision, History, Lease, ToolCall, idempotency_key
from agent_runtime.tools import DONE, check_args, lookup
from agent_runtime.worker import Outcome, Worker

log = logging.getLogger(__name__)

PLACEHOLDER: Final = {"id": "unknown", "status": "created"}  # confirm_before_call's guess


_NAME: Final = re.compile(r"^-- name: (\w+)\s*$", re.MULTILINE)


@cache
def _queries() -> dict[str, str]:
    """The ``-- name: x`` blocks of variants.sql (same format as the runtime's sql/)."""
    text = Path(__file__).with_name("variants.sql").read_text("utf-8")
    parts = _NAME.split(text)
    return {
        name: body.strip().rstrip(";") for name, body in zip(parts[1::2], parts[2::2], strict=True)
    }


def _one(conn: db.Connection, name: str, params: dict[str, Any]) -> db.Row | None:
    try:
        row: db.Row | None = conn.execute(sql.SQL(_queries()[name]), params).fetchone()
    except psycopg.OperationalError as exc:
        raise DatabaseError(f"database connection failed during {name}: {exc}") from exc
    return row


def _fenced(journal: Journal, name: str, lease: Lease, what: str, **params: Any) -> db.Row:
    row = _one(
        journal.conn,
        name,
        {"run": lease.run_id, "owner": lease.owner, "generation": lease.generation, **params},
    )
    if row is None:
        raise LeaseLost(f"run {lease.run_id} is no longer ours; {what} not written")
    return row


# -- no_decision_replay -----------------------------------------------------------------------


class ForgetfulJournal(Journal):
    """Reads back only decisions whose call was confirmed; overwrites on a re-decide."""

    def history(self, run_id: str) -> History:
        full = super().history(run_id)
        acted = {seq for seq, call in full.calls.items() if call.confirmed}
        return History(
            decisions={s: d for s, d in full.decisions.items() if s in acted},
            calls={s: c for s, c in full.calls.items() if s in acted},
        )

    def record_decision(self, lease: Lease, seq: int, tool: str, args: dict[str, Any]) -> Decision:
        row = _fenced(
            self, "overwrite_decision", lease, f"decision seq={seq}", seq=seq, tool=tool,
            args=Jsonb(args),
        )  # fmt: skip
        return Decision(
            seq=seq,
            tool=tool,
            args=args,
            llm_call=row["llm_call"],
            generation=lease.generation,
            decided_at=row["decided_at"],
        )

    def record_intent(self, lease: Lease, seq: int) -> ToolCall:
        key = idempotency_key(lease.run_id, seq)
        row = _fenced(self, "overwrite_intent", lease, f"intent seq={seq}", seq=seq, key=key)
        return ToolCall(
            seq=seq,
            idem_key=key,
            state="intent",
            result=None,
            remote_status=None,
            generation=lease.generation,
            confirm_generation=None,
            intent_at=row["intent_at"],
            confirmed_at=None,
        )


# -- no_fencing --------------------------------------------------------------------------------


class UnfencedJournal(Journal):
    """Every fenced write runs its ``unfenced_*`` twin: owner and generation are ignored."""

    def _fenced(self, name: str, lease: Lease, what: str, **params: Any) -> dict[str, Any]:
        unfenced = f"unfenced_{name}"
        if unfenced not in _queries():
            return super()._fenced(name, lease, what, **params)
        return _fenced(self, unfenced, lease, what, **params)


# -- fresh_key ---------------------------------------------------------------------------------


class FreshKeyWorker(Worker):
    """Re-sends a stranded intent under a key of its own attempt."""

    def _act(self, lease: Lease, decision: Decision, call: ToolCall | None) -> ToolCall:
        if call is not None:
            key = f"{idempotency_key(lease.run_id, decision.seq)}~{lease.generation}"
            _fenced(self.journal, "rekey_intent", lease, "new key", seq=decision.seq, key=key)
            call = dataclasses.replace(call, idem_key=key)
        return super()._act(lease, decision, call)


# -- no_intent_resolution ----------------------------------------------------------------------


class CarryOnWorker(Worker):
    """The runtime's loop, except that stranded intents are assumed to have worked."""

    def _drive(self, lease: Lease) -> Outcome:
        history = self.journal.history(lease.run_id)
        skipped = {call.seq for call in history.stranded()}  # never re-sent, never confirmed
        seq = 0
        llm_calls = 0
        while True:
            if seq in skipped:
                seq += 1
                continue
            decision = history.decisions.get(seq)
            call = history.calls.get(seq)
            if decision is None:
                decision = self._decide(lease, seq, history)
                history.decisions[seq] = decision
            llm_calls = max(llm_calls, decision.llm_call)
            if decision.tool == DONE:
                self.journal.finish(lease)
                return Outcome(run_id=lease.run_id, status="done", steps=seq, llm_calls=llm_calls)
            if call is None or not call.confirmed:
                history.calls[seq] = self._act(lease, decision, call)
            seq += 1


# -- confirm_before_call -----------------------------------------------------------------------


class EagerConfirmWorker(Worker):
    """Writes the confirm (with a placeholder result) before the cloud is called."""

    def _act(self, lease: Lease, decision: Decision, call: ToolCall | None) -> ToolCall:
        seq = decision.seq
        tool = lookup(decision.tool)
        args = check_args(tool, decision.args)
        if call is None:
            self.crash.reached("before_intent", seq)
            call = self.journal.record_intent(lease, seq)
        confirmed = self.journal.record_confirm(lease, call, dict(PLACEHOLDER), "created")
        self.crash.reached("after_intent", seq)
        answer = self.cloud.call(tool, args, key=call.idem_key, generation=lease.generation)
        self.crash.reached("after_call", seq)
        _fenced(
            self.journal, "patch_result", lease, f"result seq={seq}", seq=seq,
            result=Jsonb(answer.result), remote=answer.remote_status,
        )  # fmt: skip
        self.crash.reached("after_confirm", seq)
        return dataclasses.replace(
            confirmed, result=answer.result, remote_status=answer.remote_status
        )


# -- the registry ------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Variant:
    name: str
    summary: str
    journal: type[Journal] = Journal
    worker: type[Worker] = Worker


CORRECT: Final = Variant(name="correct", summary="the runtime as shipped")
VARIANTS: Final[dict[str, Variant]] = {
    v.name: v
    for v in (
        Variant(
            name="no_decision_replay",
            summary="a restart asks the model again for a decided step and overwrites it",
            journal=ForgetfulJournal,
        ),
        Variant(
            name="fresh_key",
            summary="a stranded intent is re-sent under a fresh idempotency key",
            worker=FreshKeyWorker,
        ),
        Variant(
            name="no_intent_resolution",
            summary="a restart assumes a stranded intent worked and carries on",
            worker=CarryOnWorker,
        ),
        Variant(
            name="no_fencing",
            summary="journal writes ignore the owner and generation",
            journal=UnfencedJournal,
        ),
        Variant(
            name="confirm_before_call",
            summary="the confirm is written before the cloud is called",
            worker=EagerConfirmWorker,
        ),
    )
}


def get(name: str | None) -> Variant:
    if name is None or name == CORRECT.name:
        return CORRECT
    try:
        return VARIANTS[name]
    except KeyError:
        raise KeyError(
            f"no runtime variant {name!r}; known: {CORRECT.name}, {', '.join(VARIANTS)}"
        ) from None
