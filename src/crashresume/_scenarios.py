"""Crash points, scenario ids and the plan of which scenarios to run.

A *life* is one start of the subject: ``make_agent(ctx)`` followed by ``step(input)`` for
every input until the inputs run out or the process dies. Effect calls are numbered from 1
within each life, counting every ``ctx.effect`` call (a keyed replay counts too: it is a
boundary where a real process can die).

Scenario ids, which are also the ``ctx.run_id`` every life of the scenario sees:

    run                        the baseline (no crash)
    run-3                      die right after effect call 3 returned, then resume
    run-before-3               die right before effect call 3 happened, then resume
    run-3-then-before-1        as run-3, and the resumed life dies right before its own call 1
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from crashresume._errors import UsageError

BASELINE_ID = "run"  # the first baseline, as the seed promises
REPEAT_ID = "run-again"  # the second baseline, run only to catch a nondeterministic subject

_ID_PATTERN = re.compile(r"run(?:-(?:before-)?[1-9][0-9]*(?:-then-(?:before-)?[1-9][0-9]*)*)?")


@dataclass(frozen=True, slots=True, kw_only=True)
class Point:
    """One place to die: just before or just after effect call ``call`` of a life."""

    call: int  # 1-based effect call within one life
    before: bool  # True: the effect never happens; False: it happened, its caller never knew

    @property
    def label(self) -> str:
        return f"before-{self.call}" if self.before else str(self.call)

    def describe(self) -> str:
        edge = "before" if self.before else "after"
        return f"right {edge} effect call {self.call}"


def scenario_id(points: Sequence[Point]) -> str:
    """The id of the scenario that dies at ``points`` in turn; ``run`` for no points."""
    if not points:
        return BASELINE_ID
    return BASELINE_ID + "-" + "-then-".join(point.label for point in points)


def parse_scenario_id(text: str) -> tuple[Point, ...]:
    """The crash points named by a scenario id (``()`` for the baseline ``run``)."""
    if not isinstance(text, str) or _ID_PATTERN.fullmatch(text) is None:
        raise UsageError(
            f"{text!r} is not a scenario id. Use 'run' (the baselines), 'run-<k>' (die right "
            "after effect call k), 'run-before-<k>' (die right before it), or chain them "
            "with '-then-' for a crash during the recovery, e.g. 'run-3-then-before-1'. "
            "Copy the id from a finding's rerun line."
        )
    if text == BASELINE_ID:
        return ()
    points = []
    for part in text[len(BASELINE_ID) + 1 :].split("-then-"):
        before = part.startswith("before-")
        number = part[len("before-") :] if before else part
        points.append(Point(call=int(number), before=before))
    return tuple(points)


def points_for(calls: int) -> list[Point]:
    """Every crash point of a life that made ``calls`` effect calls, in the order they occur."""
    points: list[Point] = []
    for call in range(1, calls + 1):
        points.append(Point(call=call, before=True))
        points.append(Point(call=call, before=False))
    return points


def describe_points(points: Iterable[Point]) -> str:
    """Plain words for a scenario's crash points, e.g. for a report line."""
    words = []
    for life, point in enumerate(points):
        where = "the first run" if life == 0 else f"resume {life}"
        words.append(f"{where} died {point.describe()}")
    return ", then ".join(words) if words else "no crash"


# Overlapping lives (``_overlap``): the first start is frozen at a point, not killed.
OVERLAP_PREFIX = BASELINE_ID + "-overlap-"
_OVERLAP_PATTERN = re.compile(r"run-overlap-(before-)?([1-9][0-9]*)")


def overlap_id(point: Point) -> str:
    """``run-overlap-<k>`` (frozen right after call k) or ``run-overlap-before-<k>``."""
    return OVERLAP_PREFIX + point.label


def parse_overlap_id(text: object) -> Point | None:
    """The freeze point an overlap scenario id names, or None for any other text."""
    found = _OVERLAP_PATTERN.fullmatch(text) if isinstance(text, str) else None
    if found is None:
        return None
    return Point(call=int(found[2]), before=found[1] is not None)


def describe_overlap(point: Point) -> str:
    """Plain words for an overlap scenario, e.g. for a report line."""
    return (
        f"the first run froze {point.describe()}, its restart ran, then the first run woke "
        "and finished its input"
    )
