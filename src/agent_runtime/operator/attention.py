"""Runs that need attention: the call in doubt, the operator's three choices, their record.

A tool whose effect contract is ``once`` cannot be asked whether a call acted, nor sent
again safely. When a restart finds its intent without a confirm, it *parks* the run
(``needs_attention``): no worker, supervisor or give-up touches it until an operator
decides, from what they know about the remote, with
``python -m agent_runtime resolve RUN --seq N`` and one of:

========  =====================================================================
choice    meaning
========  =====================================================================
confirm   it acted: the JSON given is its result (``remote_status`` operator);
          the model goes on from that result
redo      it did not act: the next worker sends it once more, under its key
fail      give it up: the call is recorded as failed with the operator's
          reason, which the model sees as the call's result
========  =====================================================================

Every choice puts the run back to ``pending`` (claimable at once) and is kept in
``call_resolutions`` (:class:`PastResolution`), so the history says who decided what, why,
and what the parked run had said. This module holds the data and the words; the SQL is
``operator_resolve_call`` and the act :func:`agent_runtime.operator.actions.resolve_call`.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final, Literal

Choice = Literal["confirm", "redo", "fail"]
CHOICES: Final[tuple[Choice, ...]] = ("confirm", "redo", "fail")
FAILED_BY_OPERATOR: Final = "failed_by_operator"  # the "error" of a call an operator failed
NO_REASON: Final = "no reason given"


def command(run_id: str, seq: int, choice: Choice) -> str:
    """The command line of one choice, the run id quoted for a shell."""
    tail = {"confirm": "--confirm JSON", "redo": "--redo", "fail": "--fail [--reason TEXT]"}
    return f"python -m agent_runtime resolve {shlex.quote(run_id)} --seq {seq} {tail[choice]}"


def meaning(choice: Choice, key: str) -> str:
    """What one choice tells the runtime, in a sentence."""
    if choice == "confirm":
        return (
            "the call acted: JSON is its result (remote_status operator) and the model goes "
            "on from that result"
        )
    if choice == "redo":
        return f"the call did not act: the next worker sends it once more, under key {key}"
    return (
        "give the call up: it is recorded as failed with your reason, and the model sees "
        "that failure as its result"
    )


def failure_result(reason: str | None) -> dict[str, Any]:
    """The result of a call an operator failed: what the model is shown."""
    given = reason or NO_REASON
    return {
        "error": FAILED_BY_OPERATOR,
        "message": f"an operator resolved this call as failed: {given}",
        "reason": given,
    }


@dataclass(frozen=True, kw_only=True)
class Attention:
    """A parked run's call in doubt, and what each of the operator's choices means."""

    run_id: str
    seq: int
    key: str
    tool: str
    effect: str
    args: dict[str, Any]
    reason: str | None  # runs.failure: why the run was parked
    parked_at: datetime
    parked_by: int  # the generation whose restart parked it

    @property
    def summary(self) -> str:
        return (
            f"seq {self.seq} ({self.tool}, key {self.key}, effect {self.effect}) is in doubt: "
            f"its intent has no confirm and nothing can tell whether it acted; no worker "
            f"takes the run until an operator decides"
        )

    def choices(self) -> list[tuple[Choice, str, str]]:
        """(choice, command, meaning) of each of the three."""
        return [(c, command(self.run_id, self.seq, c), meaning(c, self.key)) for c in CHOICES]

    def one_line(self) -> str:
        """The whole explanation in one line (an error message)."""
        options = "; ".join(f"`{cmd}`: {what}" for _, cmd, what in self.choices())
        return f"run {self.run_id} needs attention: {self.summary}. Choose one: {options}"

    def to_json(self) -> dict[str, Any]:
        return {
            "run": self.run_id,
            "seq": self.seq,
            "key": self.key,
            "tool": self.tool,
            "effect": self.effect,
            "args": self.args,
            "reason": self.reason,
            "parked_at": self.parked_at.isoformat(),
            "parked_by": self.parked_by,
            "choices": {c: {"command": cmd, "meaning": what} for c, cmd, what in self.choices()},
        }


@dataclass(frozen=True, kw_only=True)
class PastResolution:
    """One row of ``call_resolutions``: an operator's decision on a call in doubt."""

    seq: int
    idem_key: str
    effect: str
    choice: str  # confirm | redo | fail
    reason: str | None  # the operator's --reason
    result: Any  # what the call's result became (None for redo)
    generation: int  # the run's generation when parked
    intent_by: int  # who wrote the intent in doubt (a redo makes the call's own anew)
    intent_at: datetime
    parked_reason: str | None
    parked_at: datetime
    resolved_at: datetime

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> PastResolution:
        return cls(**{k: row[k] for k in cls.__dataclass_fields__})

    @property
    def outcome(self) -> str:
        """What the decision made of the call, in a few words."""
        if self.choice == "confirm":
            return "confirmed by the operator's result"
        if self.choice == "redo":
            return "ordered sent again"
        return f"failed: {self.reason or NO_REASON}"

    def to_json(self) -> dict[str, Any]:
        return {
            "seq": self.seq,
            "key": self.idem_key,
            "effect": self.effect,
            "choice": self.choice,
            "reason": self.reason,
            "result": self.result,
            "generation": self.generation,
            "parked_reason": self.parked_reason,
            "parked_at": self.parked_at.isoformat(),
            "resolved_at": self.resolved_at.isoformat(),
            "intent_by": self.intent_by,
            "intent_at": self.intent_at.isoformat(),
        }


@dataclass(frozen=True, kw_only=True)
class CallResolution:
    """What ``resolve RUN --seq N ...`` did: the call's state now, and the record."""

    run_id: str
    state: str  # confirmed | failed | redo
    past: PastResolution
    status: str = "pending"  # the run's status after it: pending, or failed (until a retry)

    def to_json(self) -> dict[str, Any]:
        return {
            "run": self.run_id,
            "status": self.status,
            "state": self.state,
            **self.past.to_json(),
        }
