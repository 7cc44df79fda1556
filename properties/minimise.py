"""The last step of shrinking: delete single events while the schedule still fails.

Hypothesis shrinks the choices that made a schedule; a schedule is also plain data, and an
event that changes nothing can simply go. :func:`minimise` replays the schedule without
one event at a time (last first) and keeps every deletion after which it still breaks an
invariant, until no single event can go or its budget is spent: the saved reproducer is
then 1-minimal, every event in it needed.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Final

from .events import Event
from .runner import ScheduleRunner
from .violations import Violation

BUDGET: Final = 15.0  # seconds of replays one minimisation may spend


def first_failure(
    runner: ScheduleRunner, events: Sequence[Event]
) -> Violation | AssertionError | None:
    """Replay ``events``; the violation it ends with, or None."""
    try:
        runner.replay(events)
    except AssertionError as exc:
        return exc
    return None


def minimise(
    runner: ScheduleRunner, events: Sequence[Event], *, budget: float = BUDGET
) -> tuple[list[Event], AssertionError | None]:
    """The shortest schedule found by single deletions, and the violation it ends with."""
    best = list(events)
    failure = first_failure(runner, best)
    if failure is None:  # does not fail on its own (it should): leave it as it is
        return best, None
    deadline = time.monotonic() + budget
    shrinking = True
    while shrinking and time.monotonic() < deadline:
        shrinking = False
        for i in reversed(range(len(best))):
            if time.monotonic() >= deadline:
                break
            candidate = best[:i] + best[i + 1 :]
            found = first_failure(runner, candidate) if candidate else None
            if found is not None:
                best, failure, shrinking = candidate, found, True
    return best, failure
