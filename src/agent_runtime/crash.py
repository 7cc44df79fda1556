"""The seven named crash points, and the plan that fires one of them.

A step passes the points in this order; ``CRASH_AT`` names one and
``CRASH_SEQ`` the step it fires on. The CLI dies with ``os._exit(1)``;
in-process tests raise :class:`InjectedCrash`, which user code catching
``Exception`` cannot swallow.

Not to be confused with the harness's ``crashresume.SimulatedCrash``, which
``conform`` raises inside a subject's ``ctx.effect``: a different class for a
different tool, hence a different name.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass

from .errors import ConfigError

CRASH_POINTS: tuple[str, ...] = (
    "before_decide",  # nothing of this step is durable; the model was not asked
    "after_decide_before_journal",  # the model answered; the answer is not written
    "after_decide",  # the decision is durable; the tool call has not started
    "before_intent",  # arguments checked; the call is not written down
    "after_intent",  # the intent is durable; the request has not gone out
    "after_call",  # the remote acted; its answer is not written down
    "after_confirm",  # the confirm is durable; the step is complete
)

log = logging.getLogger(__name__)


class InjectedCrash(BaseException):
    """A process death at a crash point, raised in-process where the CLI would ``os._exit``."""

    def __init__(self, point: str, seq: int) -> None:
        super().__init__(f"injected crash at {point} seq={seq}")
        self.point = point
        self.seq = seq


def exit_process(point: str, seq: int) -> None:
    """Die the way the CLI does: no cleanup, no flushing beyond our own line."""
    for handler in logging.getLogger().handlers:
        handler.flush()
    sys.stderr.write(f"!!! CRASH_AT={point} seq={seq} -- os._exit(1)\n")
    sys.stderr.flush()
    os._exit(1)


def raise_crash(point: str, seq: int) -> None:
    raise InjectedCrash(point, seq)


def validate_point(point: str) -> str:
    if point not in CRASH_POINTS:
        raise ConfigError(f"unknown CRASH_AT={point!r}; valid names are: {', '.join(CRASH_POINTS)}")
    return point


@dataclass(frozen=True, kw_only=True)
class CrashPlan:
    """Where to die. ``seq=None`` fires on the first step that reaches the point."""

    point: str | None = None
    seq: int | None = None
    action: Callable[[str, int], None] = exit_process

    def __post_init__(self) -> None:
        if self.point is not None:
            validate_point(self.point)
        if self.seq is not None and self.seq < 0:
            raise ConfigError(f"CRASH_SEQ must be a step number >= 0, got {self.seq}")

    def reached(self, point: str, seq: int) -> None:
        """Crash here if this is the plan's point (and seq)."""
        if point == self.point and (self.seq is None or self.seq == seq):
            self.action(point, seq)

    def missed(self, run_id: str, steps: int) -> bool:
        """Say (one WARNING line) that run ``run_id`` ended done without reaching this
        plan's point; False if there is no plan. Firing would have ended the process, so
        a run that ends is one the plan missed."""
        if self.point is None:
            return False
        log.warning(
            "crash-not-reached run=%s point=%s seq=%s steps=%d",
            run_id, self.point, "any" if self.seq is None else self.seq, steps,
        )  # fmt: skip
        return True


NO_CRASH = CrashPlan()
