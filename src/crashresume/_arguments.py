"""``conform``'s arguments checked at the edge: a wrong one is a :class:`UsageError` saying
what to give instead, before any start runs."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from crashresume._errors import UsageError
from crashresume._scenarios import Point


def positive_int(name: str, value: Any, advice: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise UsageError(f"{name}={value!r}: {advice}")


def check_arguments(make_agent: Any, inputs: Any, crashes: Any, timeout: Any) -> list[Any]:
    if not callable(make_agent):
        raise UsageError(
            f"make_agent must be callable as make_agent(ctx) and return the subject; got "
            f"{type(make_agent).__name__!r}. Pass the factory itself, not its result."
        )
    if isinstance(inputs, str | bytes):
        raise UsageError(
            f"inputs must be a list of inputs, not a single {type(inputs).__name__}; "
            f"did you mean inputs=[{inputs!r}]?"
        )
    if not isinstance(inputs, Iterable):
        raise UsageError(f"inputs must be a list of inputs; got {type(inputs).__name__!r}")
    if crashes is not None:
        positive_int(
            "crashes",
            crashes,
            "use 1 (one crash per scenario) or more (crashes=2 also crashes once during each "
            "recovery)",
        )
    if timeout is not None and (
        isinstance(timeout, bool) or not isinstance(timeout, int | float) or not timeout > 0
    ):
        raise UsageError(
            f"timeout={timeout!r}: give the seconds one start may take (e.g. timeout=30), "
            "or None for no limit"
        )
    return list(inputs)


def check_only(only: str | None, wanted: tuple[Point, ...], calls: int) -> None:
    if wanted[0].call > calls:
        raise UsageError(
            f"only={only!r} names effect call {wanted[0].call}, but the baseline made "
            f"{calls} effect call(s): use a scenario id with k from 1 to {calls}"
        )
