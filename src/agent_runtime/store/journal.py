"""The journal: fenced writes of decisions, intents, confirms and run status.

Every write names the :class:`Lease` it is made under. If the run has been
claimed by someone else since (a higher generation), the write changes nothing
and raises :class:`LeaseLost`: a worker that lost its run stops at its next write.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import replace
from datetime import datetime
from typing import Any

from psycopg.types.json import Jsonb

from agent_runtime.errors import LeaseLost, RunNotFound
from agent_runtime.store import db
from agent_runtime.store.records import (
    Decision,
    History,
    Lease,
    ModelAnswer,
    Run,
    ToolCall,
    idempotency_key,
)

log = logging.getLogger(__name__)


class Journal:
    """Every read and fenced write of the journal over one connection: runs, decisions, tool
    calls. A write made under a lease that lost the run changes nothing and raises
    :class:`LeaseLost`."""

    def __init__(self, conn: db.Connection) -> None:
        self.conn = conn

    # -- reads ---------------------------------------------------------------------------

    def get_run(self, run_id: str) -> Run | None:
        """The run with this id, or None."""
        row = db.one(self.conn, "get_run", {"run": run_id})
        return Run.from_row(row) if row else None

    def require_run(self, run_id: str) -> Run:
        """The run with this id; :class:`RunNotFound` if there is none."""
        run = self.get_run(run_id)
        if run is None:
            raise RunNotFound(f"no run with id {run_id!r}")
        return run

    def history(self, run_id: str) -> History:
        """Everything durable about the run's steps: one indexed statement."""
        decisions: dict[int, Decision] = {}
        calls: dict[int, ToolCall] = {}
        answers: dict[int, ModelAnswer] = {}
        for row in db.run(self.conn, "load_history", {"run": run_id}):
            seq = row["seq"]
            decisions[seq] = Decision.from_row(row)
            if row["idem_key"] is not None:
                calls[seq] = ToolCall.from_row({**row, "generation": row["call_generation"]})
            if row["message"] is not None and row["llm_call"] not in answers:
                answers[row["llm_call"]] = ModelAnswer.from_row(
                    {**row, "generation": row["answer_generation"]}
                )
        return History(decisions=decisions, calls=calls, answers=answers)

    # -- run lifecycle -------------------------------------------------------------------

    def create_run(
        self, run_id: str, agent: str = "provisioning", input: str | None = None
    ) -> None:
        """Create the run (a run that exists keeps its own agent and input)."""
        db.run(self.conn, "create_run", {"run": run_id, "agent": agent, "input": input})

    def claim(
        self,
        run_id: str,
        owner: str,
        lease: float,
        *,
        dead_owner: str | None = None,
        dead_generation: int | None = None,
        forced: bool = False,
    ) -> Lease | None:
        """Claim ``run_id`` for ``owner``, or None when it is held or final.

        A run that is free or whose lease expired is claimed as it is. A live lease is
        taken only from ``dead_owner`` at ``dead_generation``: an owner the caller proved
        dead, or, with ``forced``, one it fences out without proof. ``run_claims`` records
        which (its ``reason``).
        """
        row = db.one(
            self.conn,
            "claim_run",
            {
                "run": run_id,
                "owner": owner,
                "lease": lease,
                "dead_owner": dead_owner,
                "dead_generation": dead_generation,
                "forced": forced,
            },
        )
        if row is None:
            return None
        return Lease(run_id=run_id, owner=owner, generation=row["generation"])

    def _write(self, name: str, lease: Lease, what: str, **params: Any) -> list[dict[str, Any]]:
        """Run the fenced statement ``name`` under ``lease``: its rows, or LeaseLost when it
        wrote nothing (the run is no longer ours)."""
        rows = db.run(
            self.conn,
            name,
            {"run": lease.run_id, "owner": lease.owner, "generation": lease.generation, **params},
        )
        if not rows:
            raise LeaseLost(
                f"run {lease.run_id} is no longer ours (generation {lease.generation}); "
                f"{what} not written"
            )
        return rows

    def _fenced(self, name: str, lease: Lease, what: str, **params: Any) -> dict[str, Any]:
        return self._write(name, lease, what, **params)[0]

    def adopt(self, lease: Lease, owner: str) -> tuple[Lease, History | None]:
        """Put ``owner`` on a lease claimed for it (same generation). With it, the run's
        history when the adoption proved it empty (no decision yet, and none but the new
        owner can write one now), else None: read it."""
        row = self._fenced("adopt_lease", lease, "lease adoption", new_owner=owner)
        adopted = Lease(run_id=lease.run_id, owner=owner, generation=lease.generation)
        return adopted, None if row["has_steps"] else History(decisions={}, calls={}, answers={})

    def renew(self, lease: Lease, seconds: float) -> datetime:
        """Extend the lease by ``seconds``; the new expiry. :class:`LeaseLost` if fenced."""
        row = self._fenced("renew_lease", lease, "lease renewal", seconds=seconds)
        expires: datetime = row["lease_expires_at"]
        return expires

    def check_owner(self, lease: Lease, what: str) -> None:
        """:class:`LeaseLost` (naming ``what``) unless ``lease`` still owns the run."""
        self._fenced("check_owner", lease, what)

    def finish(self, lease: Lease, output: str | None = None) -> None:
        """Mark the run done with its final answer ``output`` (fenced)."""
        self._fenced("finish_run", lease, "run completion", output=output)

    def park(self, lease: Lease, reason: str) -> None:
        """The run needs an operator (a call in doubt that nothing can tell): no claim takes
        it until one resolves the call."""
        self._fenced("park_run", lease, "needs attention", reason=reason)

    def fail(self, lease: Lease, reason: str) -> None:
        """Mark the run failed for ``reason`` (fenced); nothing resumes it but ``retry``."""
        self._fenced("fail_run", lease, "run failure", reason=reason)

    def release(self, lease: Lease, reason: str, delay: float = 0.0) -> bool:
        """Give the run up, resumable, claimable again after ``delay`` seconds."""
        return (
            db.one(
                self.conn,
                "release_run",
                {
                    "run": lease.run_id,
                    "owner": lease.owner,
                    "generation": lease.generation,
                    "reason": reason,
                    "delay": delay,
                },
            )
            is not None
        )

    # -- the three writes of a step ------------------------------------------------------

    def record_decision(self, lease: Lease, seq: int, tool: str, args: dict[str, Any]) -> Decision:
        """Journal one decision as an answer of its own (the seed's protocol's shape)."""
        (decision,) = self.record_answer(
            lease, seq, [(tool, args, None)], message={"tool": tool, "args": args}
        )
        return decision

    def record_answer(
        self,
        lease: Lease,
        seq: int,
        decided: list[tuple[str, dict[str, Any], str | None]],
        *,
        message: dict[str, Any],
        usage: dict[str, Any] | None = None,
        rejected: Mapping[int, dict[str, Any]] | None = None,
    ) -> list[Decision]:
        """Journal one model answer (``message``, whole, with ``usage``) and its decisions:
        ``decided`` as (tool, args, call id), numbered from ``seq``. ``rejected``: by index
        in ``decided``, the error of each call the runtime refused, journaled as that
        call's result (failed, ``remote_status`` rejected). One fenced statement."""
        refused = rejected or {}
        rows: list[dict[str, Any]] = [
            {
                "seq": seq + i,
                "tool": tool,
                "args": args,
                "call_id": call_id,
                "key": idempotency_key(lease.run_id, seq + i),
                "rejected": refused.get(i),
            }
            for i, (tool, args, call_id) in enumerate(decided)
        ]
        written = self._write(
            "record_decision",
            lease,
            f"decision seq={seq}",
            message=Jsonb(message),
            usage=Jsonb(usage) if usage is not None else None,
            decisions=Jsonb(rows),
        )
        by_seq = {row["seq"]: row for row in written}
        return [
            Decision(
                seq=r["seq"],
                tool=r["tool"],
                args=r["args"],
                llm_call=by_seq[r["seq"]]["llm_call"],
                generation=lease.generation,
                decided_at=by_seq[r["seq"]]["decided_at"],
                call_id=r["call_id"],
            )
            for r in rows
        ]

    def record_intent(
        self, lease: Lease, seq: int, effect: str = "keyed", in_flight: float | None = None
    ) -> ToolCall:
        """The call's intent, durable before it is sent: the first attempt's start, whose
        request may still act until ``in_flight`` seconds later (None: no bound)."""
        key = idempotency_key(lease.run_id, seq)
        row = self._fenced(
            "record_intent",
            lease,
            f"intent seq={seq}",
            seq=seq,
            key=key,
            effect=effect,
            in_flight=in_flight,
        )
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
            effect=effect,
            lands_by=row["lands_by"],
        )

    def record_send(self, lease: Lease, call: ToolCall, in_flight: float | None) -> ToolCall:
        """One more attempt of ``call`` is about to leave: its start, durable before it is
        sent, so that a later check waits out this request too."""
        row = self._fenced(
            "record_send",
            lease,
            f"send seq={call.seq}",
            seq=call.seq,
            in_flight=in_flight,
        )
        return replace(call, lands_by=row["lands_by"], sends=row["sends"])

    def landing_wait(self, lease: Lease, call: ToolCall) -> float:
        """Seconds (on the database clock) until no journaled attempt of ``call`` can act
        any more; :class:`LeaseLost` unless this owner still holds the run."""
        row = self._fenced("landing_wait", lease, f"check of {call.idem_key}", seq=call.seq)
        seconds: float = row["seconds"]
        return seconds

    def record_redo(self, lease: Lease, call: ToolCall, in_flight: float | None = None) -> ToolCall:
        """An operator's redo becomes this generation's intent again, before it is sent: a
        crash after the send then leaves an intent in doubt, never a second redo. It is an
        attempt like any other: journaled with its in-flight bound."""
        row = self._fenced(
            "redo_intent", lease, f"intent seq={call.seq}", seq=call.seq, in_flight=in_flight
        )
        return replace(
            call,
            state="intent",
            generation=lease.generation,
            intent_at=row["intent_at"],
            lands_by=row["lands_by"],
            sends=row["sends"],
        )

    def record_confirm(
        self,
        lease: Lease,
        call: ToolCall,
        result: Any,
        remote_status: str,
        *,
        state: str = "confirmed",
    ) -> ToolCall:
        """Resolve the call: its result (``state='failed'``: the error the model sees).

        Committed without waiting for the WAL flush, except for a ``once`` call
        (:func:`confirm_commit`)."""
        row = self._fenced(
            "record_confirm",
            lease,
            f"confirm seq={call.seq}",
            seq=call.seq,
            result=Jsonb(result),
            remote=remote_status,
            state=state,
            commit=confirm_commit(call.effect),
        )
        return ToolCall(
            seq=call.seq,
            idem_key=call.idem_key,
            state=state,
            result=result,
            remote_status=remote_status,
            generation=call.generation,
            confirm_generation=lease.generation,
            intent_at=call.intent_at,
            confirmed_at=row["confirmed_at"],
            effect=call.effect,
            lands_by=call.lands_by,
            sends=call.sends,
        )


def confirm_commit(effect: str) -> str:
    """``synchronous_commit`` for the confirm of a call under ``effect``: ``off`` where a
    confirm a database crash takes back is recovered by the contract itself (a keyed
    re-send answered ``already_done``, a checked call's check, a read again); ``on`` for a
    ``once`` call, whose lost confirm would park the run for an operator although the call
    was recorded done."""
    return "on" if effect == "once" else "off"
