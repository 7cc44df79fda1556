"""Rows of the journal's tables as frozen, keyword-only dataclasses."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final

REJECTED: Final = "rejected"  # remote_status of a call refused before it was sent


@dataclass(frozen=True, kw_only=True)
class Run:
    id: str
    status: str
    owner: str | None
    generation: int
    lease_expires_at: datetime | None
    llm_calls: int
    attempts: int
    failure: str | None
    created_at: datetime
    updated_at: datetime
    now: datetime  # the database clock (cr_now()) when the row was read
    progress_at: datetime | None = None  # creation, the last confirm, or an operator's retry
    agent: str = "provisioning"  # the agent the run belongs to (Agent.name)
    input: str | None = None  # the task the run was started with (None: the agent's own)
    output: str | None = None  # the final answer's text, once done

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> Run:
        """The record of one database row."""
        return cls(**{k: row[k] for k in cls.__dataclass_fields__})

    @property
    def lease_live(self) -> bool:
        """Someone owns the run and its lease has not expired."""
        return (
            self.owner is not None
            and self.lease_expires_at is not None
            and self.lease_expires_at > self.now
        )

    @property
    def backing_off(self) -> bool:
        """Free, not final, and not claimable before ``lease_expires_at`` (a backoff)."""
        return (
            self.status in ("pending", "running")
            and self.owner is None
            and self.lease_expires_at is not None
            and self.lease_expires_at > self.now
        )


@dataclass(frozen=True, kw_only=True)
class Decision:
    seq: int
    tool: str
    args: dict[str, Any]
    llm_call: int  # the journaled model answer it came from (model_answers)
    generation: int
    decided_at: datetime
    call_id: str | None = None  # the model's id of this call (Chat Completions)

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> Decision:
        """The record of one database row."""
        return cls(**{k: row[k] for k in cls.__dataclass_fields__})


@dataclass(frozen=True, kw_only=True)
class ToolCall:
    seq: int
    idem_key: str
    state: str  # 'intent' | 'redo' | 'confirmed' | 'failed' (schema.sql)
    result: Any  # the tool's answer (or the failure), None while unresolved
    remote_status: str | None
    generation: int
    confirm_generation: int | None
    intent_at: datetime
    confirmed_at: datetime | None
    effect: str = "keyed"  # the tool's effect contract when the intent was written
    lands_by: datetime | None = None  # until when its latest attempt may still act (cr_now())
    sends: int = 1  # attempts journaled as sent

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> ToolCall:
        """The record of one database row."""
        return cls(**{k: row[k] for k in cls.__dataclass_fields__ if k in row})

    @property
    def confirmed(self) -> bool:
        """Resolved: the result (or the failure) is recorded; nothing is in doubt."""
        return self.state in ("confirmed", "failed")

    @classmethod
    def rejected(cls, run_id: str, decision: Decision, error: dict[str, Any]) -> ToolCall:
        """The call of a decision the runtime refused (an unknown tool, invalid arguments),
        as the answer's own statement journals it: failed, never sent, ``error`` its result."""
        return cls(
            seq=decision.seq,
            idem_key=idempotency_key(run_id, decision.seq),
            state="failed",
            result=error,
            remote_status=REJECTED,
            generation=decision.generation,
            confirm_generation=decision.generation,
            intent_at=decision.decided_at,
            confirmed_at=decision.decided_at,
            effect="read",
            sends=0,
        )


@dataclass(frozen=True, kw_only=True)
class ModelAnswer:
    """One journaled model answer, whole."""

    llm_call: int
    message: dict[str, Any]
    usage: dict[str, Any] | None
    generation: int
    answered_at: datetime

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> ModelAnswer:
        """The record of one database row."""
        return cls(**{k: row[k] for k in cls.__dataclass_fields__})


@dataclass(frozen=True, kw_only=True)
class RunTask:
    """What a run is for: its agent and its input (None: the agent's own). Both are set
    when the run is created and never change, so the claim that read them may hand them
    to the worker that takes the lease, which then need not read the run again."""

    agent: str
    input: str | None


@dataclass(frozen=True, kw_only=True)
class Lease:
    """What a worker holds: every journal write names it and fails once it is stale."""

    run_id: str
    owner: str
    generation: int


@dataclass(frozen=True, kw_only=True)
class History:
    """Everything durable about one run's steps, read back at (re)start."""

    decisions: dict[int, Decision]
    calls: dict[int, ToolCall]
    answers: dict[int, ModelAnswer] = field(default_factory=dict)
    # what the model clients built from this history so far, so the next question only
    # adds the steps since (agent_runtime.llm.conversation.Transcript); never compared or shown
    memo: dict[str, object] = field(default_factory=dict, compare=False, repr=False)

    def stranded(self) -> list[ToolCall]:
        """Intents without a confirm: calls whose outcome the journal cannot tell."""
        return [c for c in sorted(self.calls.values(), key=lambda c: c.seq) if not c.confirmed]

    def confirmed_steps(self) -> list[dict[str, Any]]:
        """The run's history as the seed's protocol shows it to the model: every resolved
        call (a failed one's result is the error the model should hear)."""
        steps = []
        for seq in sorted(self.calls):
            call = self.calls[seq]
            if call.confirmed:
                d = self.decisions[seq]
                steps.append({"seq": seq, "tool": d.tool, "args": d.args, "result": call.result})
        return steps


def idempotency_key(run_id: str, seq: int) -> str:
    return f"{run_id}:{seq}"
