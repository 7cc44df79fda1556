"""A cancelled run as the operator reads it: who was fenced, and which call was in flight.

``cancel`` (``operator_cancel_run``) makes the run ``cancelled`` with no owner. From that
commit on, every journal write of its worker is refused (each requires ``status =
'running'`` and its own owner and generation), and so is every attempt of a call with an
effect, which the worker sends only after reading its ownership back
(:mod:`agent_runtime.tools.acting`). So nothing changes the journal after the cancel, and what
it holds then is exactly what it held at the cancel: a call whose intent has no confirm
(state ``intent``) was *in flight when cancelled* (its request never sent, or sent and
maybe acted, or acted and not yet recorded); a ``redo`` was ordered sent again and never
was. :class:`Cancelled` says which, when, and what the operator should do about it, by
the call's effect contract. What stays open is a request that left before the cancel
committed: the remote may still act on it, at most once for its key.

:class:`Cancellation` is what the ``cancel`` command itself did.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any


@dataclass(frozen=True, kw_only=True)
class InFlight:
    """A call the cancel left without a confirm: an intent, or an operator's redo."""

    seq: int
    key: str
    tool: str
    effect: str  # keyed | checked | read | once (journaled with the intent)
    state: str  # intent | redo (tool_calls.state)
    args: dict[str, Any]
    intent_at: datetime  # when the intent (or the operator's redo) was written
    intent_by: int  # the generation that wrote the intent

    def summary(self, when: Callable[[datetime], str]) -> str:
        """One line, the times as ``when`` writes them."""
        if self.state == "redo":
            how = f"redo ordered {when(self.intent_at)}, not yet sent"
        else:
            how = f"intent written {when(self.intent_at)} by generation {self.intent_by}"
        return f"seq {self.seq} {self.tool} key {self.key} ({self.effect}, {how})"

    @property
    def advice(self) -> str:
        """What the operator should do about it, by its contract."""
        key = self.key
        if self.state == "redo":
            return (
                "an operator had ordered it sent again and no worker had sent it: nothing was "
                "sent after that order and nothing will be"
            )
        late = (
            "a request sent before the cancel may still land; nothing sent after it is "
            "accepted, and nothing will send this call again"
        )
        if self.effect == "read":
            return f"a read has no effect: nothing to do ({late})"
        if self.effect == "once":
            return (
                f"it may have acted, and nothing can tell ({self.tool} is 'once'; {late}): "
                "find out at the remote by hand, and undo it there if the run's work must "
                "not stand"
            )
        if self.effect == "checked":
            return (
                f"it may have acted ({late}): ask the remote whether {key} exists (the "
                "tool's own check), and undo it there if the run's work must not stand"
            )
        return (
            f"it may have acted, at most once under its key ({late}): look key {key} up at "
            "the remote to learn whether it did, and undo it there if the run's work must "
            "not stand"
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "seq": self.seq,
            "key": self.key,
            "tool": self.tool,
            "effect": self.effect,
            "state": self.state,
            "args": self.args,
            "intent_at": self.intent_at.isoformat(),
            "intent_by": self.intent_by,
            "advice": self.advice,
        }


@dataclass(frozen=True, kw_only=True)
class Cancelled:
    """A cancelled run: when and why, the generation fenced, and what was left."""

    cancelled_at: datetime  # runs.updated_at: nothing writes the run after the cancel
    reason: str | None  # runs.failure
    generation: int  # the last generation to hold the run: fenced by the cancel
    owner: str | None  # its owner token (run_claims), if recorded
    in_flight: list[InFlight] = field(default_factory=list)
    decided: list[tuple[int, str]] = field(default_factory=list)  # (seq, tool), never called

    def to_json(self) -> dict[str, Any]:
        return {
            "cancelled_at": self.cancelled_at.isoformat(),
            "reason": self.reason,
            "generation": self.generation,
            "owner": self.owner,
            "in_flight": [c.to_json() for c in self.in_flight],
            "decided": [{"seq": seq, "tool": tool} for seq, tool in self.decided],
        }


def nothing_in_flight(decided: list[tuple[int, str]]) -> str:
    """The sentence for a cancel that left no call without a confirm."""
    text = "no tool call was in flight: every intent had its confirm"
    if decided:
        steps = ", ".join(f"seq {seq} {tool}" for seq, tool in decided)
        text += f"; {steps} was decided but never called, and never will be"
    return text


@dataclass(frozen=True, kw_only=True)
class Cancellation:
    """What ``cancel`` did (``already``: the run was cancelled before; nothing changed)."""

    run_id: str
    previous_status: str
    previous_owner: str | None
    generation: int
    cancelled_at: datetime
    already: bool  # it was cancelled before this call; nothing changed
    left_in_doubt: list[str] = field(default_factory=list)  # keys of intents with no confirm
    in_flight: list[InFlight] = field(default_factory=list)
    decided: list[tuple[int, str]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "run": self.run_id,
            "status": "cancelled",
            "already_cancelled": self.already,
            "previous_status": self.previous_status,
            "previous_owner": self.previous_owner,
            "generation": self.generation,
            "cancelled_at": self.cancelled_at.isoformat(),
            "left_in_doubt": self.left_in_doubt,
            "in_flight": [c.to_json() for c in self.in_flight],
            "decided": [{"seq": seq, "tool": tool} for seq, tool in self.decided],
        }
