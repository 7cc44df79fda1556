"""The fault and latency knobs of the mocks (in memory, never durable).

A knob update names only the fields it changes; the others keep their value.
Counting knobs (`fail_before`, `malformed`, ...) are consumed one per request;
`latency` and `hang` are seconds and stay until changed or reset.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from mock_remotes.errors import InvalidRequest

__all__ = ["HANG", "CloudFaults", "ModelFaults", "SupportFaults", "taken", "updated"]

HANG = 30.0  # seconds a dropped cloud answer is held before it is sent (uvicorn only)


@dataclass(frozen=True, kw_only=True)
class CloudFaults:
    fail_before: int = 0  # next n mutating requests: 500 injected_failure, nothing happens
    drop_after: int = 0  # next n successful mutating requests: act, commit, lose the answer
    latency: float = 0.0  # seconds every mutating request waits before acting
    hang: float = HANG  # seconds a dropped answer is held (a client timeout fires first)
    hold_next: int = 0  # next n mutating requests: answered 504 held, acted only at a landing


@dataclass(frozen=True, kw_only=True)
class ModelFaults:
    malformed: int = 0  # next n answers: 200 but not a decision (bad JSON / no "tool")
    unknown_tool: int = 0  # next n answers: {"tool": "delete_everything", "args": {}}
    invalid_args: int = 0  # next n answers: the right tool with arguments it refuses
    latency: float = 0.0  # seconds every decision waits (after counting the call)


@dataclass(frozen=True, kw_only=True)
class SupportFaults:
    fail_before: int = 0  # next n tickets/sends: 500 injected_failure, nothing happens
    drop_after: int = 0  # next n successful tickets/sends: act, commit, lose the answer
    latency: float = 0.0  # seconds every ticket and send waits before acting
    hang: float = HANG  # seconds a dropped answer is held (a client timeout fires first)
    send_latency: float = 0.0  # seconds every send (not a ticket) waits before acting: the
    # email still lands after its sender timed out, died or checked (a request in flight)
    hold_next: int = 0  # next n tickets/sends: answered 504 held, acted only at a landing
    fail_lookups: int = 0  # next n order lookups: 500 injected_failure (a read's outage)


_Knobs = TypeVar("_Knobs", CloudFaults, ModelFaults, SupportFaults)


def _check(name: str, kind: type, value: object) -> int | float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidRequest(f"fault {name!r} must be a number, got {value!r}")
    if kind is int and not (isinstance(value, int) or float(value).is_integer()):
        raise InvalidRequest(f"fault {name!r} must be a whole number, got {value!r}")
    if value < 0 or not math.isfinite(value):
        raise InvalidRequest(f"fault {name!r} must be a finite number >= 0, got {value!r}")
    return int(value) if kind is int else float(value)


def updated(current: _Knobs, changes: Mapping[str, Any]) -> _Knobs:
    """`current` with `changes` applied; unknown names and bad values raise `InvalidRequest`."""
    kinds = {f.name: (int if f.type == "int" else float) for f in dataclasses.fields(current)}
    unknown = sorted(set(changes) - set(kinds))
    if unknown:
        raise InvalidRequest(
            f"unknown fault knob(s) {', '.join(unknown)}; known: {', '.join(sorted(kinds))}"
        )
    checked: dict[str, Any] = {
        name: _check(name, kinds[name], value)
        for name, value in changes.items()
        if value is not None
    }
    return dataclasses.replace(current, **checked)


def taken(current: _Knobs, knob: str) -> tuple[_Knobs, bool]:
    """`current` with one use of the counting `knob` consumed, and whether one was left."""
    left: int = getattr(current, knob)
    if left <= 0:
        return current, False
    return dataclasses.replace(current, **{knob: left - 1}), True
