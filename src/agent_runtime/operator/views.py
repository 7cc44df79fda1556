"""What the operator sees, as frozen keyword-only dataclasses, and the time phrases it reads.

- :class:`RunSummary` / :class:`RunList`: one line of ``runs`` each, and the listing;
- :class:`Claim`, :class:`Step`, :class:`Event`, :class:`RunHistory`: one run's history,
  read by :func:`agent_runtime.operator.snapshot.read_history`;
- :class:`PastRetry`: one operator's retry in a run's history (the failure it cleared);
- what ``resolve`` and ``retry`` did: :mod:`.outcomes` (``cancel``: :mod:`.cancelled`).

Times print in local time to the millisecond (``12:00:03.412``), compared with the
database clock ``cr_now()`` that was read with the data.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from agent_runtime.llm.conversation import DONE
from agent_runtime.logfmt import brief
from agent_runtime.loop.lease import owner_is_dead
from agent_runtime.store.records import Run

from .attention import Attention, PastResolution

if TYPE_CHECKING:
    from .cancelled import Cancelled


def clock_text(at: datetime, now: datetime | None = None) -> str:
    """``12:00:03.412`` in local time, with the date in front when it is not today's."""
    local = at.astimezone()
    text = local.strftime("%H:%M:%S.") + f"{local.microsecond // 1000:03d}"
    if now is not None and now.astimezone().date() != local.date():
        text = local.strftime("%Y-%m-%d ") + text
    return text


def relative(at: datetime, now: datetime) -> str:
    """``in 11.2s`` or ``6.0s ago`` (minutes and hours past a minute)."""
    seconds = (at - now).total_seconds()
    size = abs(seconds)
    if size < 60:
        span = f"{size:.1f}s"
    elif size < 3600:
        span = f"{size / 60:.1f}m"
    else:
        span = f"{size / 3600:.1f}h"
    return f"in {span}" if seconds > 0 else f"{span} ago"


def owner_pid(owner: str | None) -> str | None:
    """The pid part of a ``host:pid:nonce`` owner token, if it has one."""
    parts = (owner or "").split(":")
    return parts[1] if len(parts) >= 3 and parts[1].isdigit() else None


@dataclass(frozen=True, kw_only=True)
class Claim:
    """One row of ``run_claims``: who took the run at which generation, from whom, and why."""

    generation: int
    owner: str
    previous_owner: str | None
    previous_expired_at: datetime | None
    claimed_at: datetime
    # first, handed_back, expired, owner_dead or forced (schema.sql says what each means);
    # None for a claim recorded before run_claims had the column.
    reason: str | None = None

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> Claim:
        return cls(**{k: row[k] for k in cls.__dataclass_fields__})

    @property
    def kind(self) -> str:
        """``first``, ``free`` (handed back), ``expired`` or ``live`` (a takeover)."""
        if self.previous_owner is None:
            return "first" if self.generation == 1 else "free"
        if self.previous_expired_at is not None and self.previous_expired_at <= self.claimed_at:
            return "expired"
        return "live"

    @property
    def why(self) -> str | None:
        """The recorded reason; for an older claim, what its columns prove (None: a live
        lease was taken, and nothing says whether its owner was proved dead)."""
        if self.reason is not None:
            return self.reason
        return {"first": "first", "free": "handed_back", "expired": "expired"}.get(self.kind)

    @property
    def takeover(self) -> bool:
        return self.kind in ("expired", "live")


@dataclass(frozen=True, kw_only=True)
class PastRetry:
    """One row of ``run_retries``: an operator's retry, and what the run was before it."""

    generation: int  # the run's generation at the retry
    previous_status: str  # failed, or pending/running (a free run: its backoff ended)
    previous_failure: str | None
    previous_attempts: int
    previous_since: datetime  # when it failed (or last stopped)
    retried_at: datetime

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> PastRetry:
        return cls(**{k: row[k] for k in cls.__dataclass_fields__})

    def to_json(self) -> dict[str, Any]:
        return {
            "generation": self.generation,
            "previous_status": self.previous_status,
            "previous_failure": self.previous_failure,
            "previous_attempts": self.previous_attempts,
            "previous_since": self.previous_since.isoformat(),
            "retried_at": self.retried_at.isoformat(),
        }


@dataclass(frozen=True, kw_only=True)
class Step:
    """A decided step and its tool call, if any, with what the journal proves about it."""

    seq: int
    tool: str
    args: dict[str, Any]
    llm_call: int
    decided_at: datetime
    decided_by: int  # generation
    key: str | None = None
    intent_at: datetime | None = None
    intent_by: int | None = None
    confirmed_at: datetime | None = None
    confirmed_by: int | None = None
    result: Any = None  # the tool's answer (any JSON), or the failure
    remote_status: str | None = None  # created already_done found read operator failed
    verdict: str | None = None  # a sentence for a step that is not settled
    effect: str | None = None  # the call's contract, journaled with its intent
    call_state: str | None = None  # intent redo confirmed failed (tool_calls.state)

    @property
    def state(self) -> str:
        """``finish`` (the model's done), ``confirmed`` (a result or a failure is recorded),
        ``redo`` (an operator ordered it sent again), ``in_doubt`` or ``decided``."""
        if self.tool == DONE:
            return "finish"
        if self.call_state == "redo":
            return "redo"
        if self.confirmed_at is not None:
            return "confirmed"
        return "in_doubt" if self.intent_at is not None else "decided"

    @property
    def replayed_by(self) -> int | None:
        """The first other generation that acted on this decision, if any."""
        for generation in (self.intent_by, self.confirmed_by):
            if generation is not None and generation != self.decided_by:
                return generation
        return None

    @property
    def resent(self) -> bool:
        """Confirmed by another generation than wrote the intent: re-sent under its key."""
        return self.confirmed_by is not None and self.confirmed_by != self.intent_by

    @property
    def result_id(self) -> str | None:
        value = self.result.get("id") if isinstance(self.result, dict) else None
        return str(value) if value is not None else None

    @property
    def result_text(self) -> str:
        """The result as a line shows it: its ``id``, else its compact JSON (cut)."""
        return brief(self.result)

    @property
    def by_operator(self) -> bool:
        """Resolved by hand: an operator confirmed or failed the call."""
        return self.remote_status == "operator"

    def to_json(self) -> dict[str, Any]:
        return {
            "seq": self.seq,
            "state": self.state,
            "tool": self.tool,
            "args": self.args,
            "llm_call": self.llm_call,
            "decided_at": self.decided_at.isoformat(),
            "decided_by": self.decided_by,
            "replayed": self.replayed_by is not None,
            "replayed_by": self.replayed_by,
            "key": self.key,
            "intent_at": iso(self.intent_at),
            "intent_by": self.intent_by,
            "confirmed_at": iso(self.confirmed_at),
            "confirmed_by": self.confirmed_by,
            "resent": self.resent,
            "result": self.result,
            "remote_status": self.remote_status,
            "effect": self.effect,
            "call_state": self.call_state,
            "verdict": self.verdict,
        }


@dataclass(frozen=True, kw_only=True)
class Event:
    """One mark on the timeline; ``generation`` None for the operator's own acts."""

    at: datetime
    kind: str  # claim takeover decide intent confirm crash fenced stopped expired done failed
    # cancelled retried attention (parked) resolved (an operator's decision on a call)
    generation: int | None
    text: str  # one sentence
    seq: int | None = None
    key: str | None = None
    label: str = ""  # short, for the picture: "decide 0"
    details: tuple[str, ...] = ()  # short lines under the label

    def to_json(self) -> dict[str, Any]:
        return {
            "at": self.at.isoformat(),
            "kind": self.kind,
            "generation": self.generation,
            "seq": self.seq,
            "key": self.key,
            "text": self.text,
        }


@dataclass(frozen=True, kw_only=True)
class RunHistory:
    run: Run
    claims: list[Claim]
    steps: list[Step]
    events: list[Event]
    in_doubt: list[str]  # one verdict per intent without a confirm
    notes: list[str]  # the run's state, and steps decided but not yet called
    owner_gone: bool = False  # the owner ran on this host and its process is gone
    owners: dict[int, str] = field(default_factory=dict)  # generation -> owner token
    retries: list[PastRetry] = field(default_factory=list)  # oldest first
    resolutions: list[PastResolution] = field(default_factory=list)  # oldest first
    attention: Attention | None = None  # the call in doubt of a parked run, and the choices
    cancelled: Cancelled | None = None  # a cancelled run: what the cancel fenced and left

    @property
    def now(self) -> datetime:
        return self.run.now

    def to_json(self) -> dict[str, Any]:
        run = self.run
        return {
            "run": {
                "id": run.id,
                "status": run.status,
                "agent": run.agent,
                "input": run.input,
                "output": run.output,
                "owner": run.owner,
                "owner_gone": self.owner_gone,
                "generation": run.generation,
                "lease_expires_at": iso(run.lease_expires_at),
                "lease_live": run.lease_live,
                "llm_calls": run.llm_calls,
                "attempts": run.attempts,
                "failure": run.failure,
                "backing_off_until": iso(run.lease_expires_at) if run.backing_off else None,
                "progress_at": iso(run.progress_at),
                "created_at": run.created_at.isoformat(),
                "updated_at": run.updated_at.isoformat(),
                "steps_confirmed": sum(1 for s in self.steps if s.state == "confirmed"),
            },
            "now": run.now.isoformat(),
            "claims": [
                {
                    "generation": c.generation,
                    "owner": c.owner,
                    "kind": c.kind,
                    "reason": c.reason,
                    "previous_owner": c.previous_owner,
                    "previous_expired_at": iso(c.previous_expired_at),
                    "claimed_at": c.claimed_at.isoformat(),
                }
                for c in self.claims
            ],
            "steps": [s.to_json() for s in self.steps],
            "events": [e.to_json() for e in self.events],
            "in_doubt": self.in_doubt,
            "notes": self.notes,
            "retries": [r.to_json() for r in self.retries],
            "attention": self.attention.to_json() if self.attention is not None else None,
            "resolutions": [r.to_json() for r in self.resolutions],
            "cancelled": self.cancelled.to_json() if self.cancelled is not None else None,
        }


def iso(at: datetime | None) -> str | None:
    return at.isoformat() if at is not None else None


@dataclass(frozen=True, kw_only=True)
class RunSummary:
    """One line of ``runs``."""

    id: str
    status: str
    agent: str  # the agent the run belongs to
    owner: str | None
    owner_gone: bool
    generation: int
    lease_expires_at: datetime | None
    llm_calls: int
    attempts: int
    steps: int  # confirmed tool calls
    in_doubt: int  # intents without a confirm
    first_in_doubt: int | None  # the seq of the first of them
    failure: str | None
    created_at: datetime
    updated_at: datetime  # the last change to the run: a claim, a stop, an intent or confirm
    now: datetime

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> RunSummary:
        gone = (
            row["status"] == "running"
            and row["lease_expires_at"] is not None
            and row["lease_expires_at"] > row["now"]
            and owner_is_dead(row["owner"])
        )
        fields = {k: row[k] for k in cls.__dataclass_fields__ if k != "owner_gone"}
        return cls(owner_gone=gone, **fields)

    @property
    def lease_live(self) -> bool:
        expires = self.lease_expires_at
        return self.owner is not None and expires is not None and expires > self.now

    @property
    def backing_off(self) -> bool:
        """Stopped by a resumable error and free, but nobody may claim it before
        ``lease_expires_at`` (its backoff); its status still says pending or running."""
        expires = self.lease_expires_at
        return (
            self.status in ("pending", "running")
            and self.owner is None
            and expires is not None
            and expires > self.now
        )

    @property
    def waiting_since(self) -> datetime | None:
        """Since when it waits for a worker of its agent (claimable: free past any backoff,
        or its lease ran out), or None."""
        expires = self.lease_expires_at
        claimable = self.status in ("pending", "running") and (
            expires is None or expires <= self.now
        )
        return (expires or self.updated_at) if claimable else None

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "status": self.status,
            "agent": self.agent,
            "waiting_since": iso(self.waiting_since),
            "owner": self.owner,
            "owner_gone": self.owner_gone,
            "generation": self.generation,
            "lease_expires_at": iso(self.lease_expires_at),
            "lease_live": self.lease_live,
            "steps_confirmed": self.steps,
            "in_doubt": self.in_doubt,
            "first_in_doubt": self.first_in_doubt,
            "llm_calls": self.llm_calls,
            "attempts": self.attempts,
            "last_activity": self.updated_at.isoformat(),
            "created_at": self.created_at.isoformat(),
            "failure": self.failure,
        }


@dataclass(frozen=True, kw_only=True)
class RunList:
    runs: list[RunSummary]
    next: str | None  # the cursor (--after) of the next page; None: this is the last
    now: datetime | None

    def to_json(self) -> dict[str, Any]:
        return {
            "now": iso(self.now),
            "next": self.next,
            "runs": [r.to_json() for r in self.runs],
        }
