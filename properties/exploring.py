"""One exploration: the small scope's grid, then the state machine under a profile.

:func:`explore` is what the suite's tests, the nightly hunt, the variants' check and the
mutation command run; it never raises the finding itself, it returns it
(:class:`Exploration`), each saved failure minimised (the grid's too: a story may carry
events its failure does not need).
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from pathlib import Path

from hypothesis.stateful import run_state_machine_as_test

from . import scope
from .driving import Stats
from .events import Schedule
from .machine import FAILURES, SHRINK_BUDGET, bind, report, shrinking_within
from .minimise import first_failure, minimise
from .profiles import profile_settings
from .progress import Progress
from .runner import ScheduleRunner


@dataclass(kw_only=True)
class Exploration:
    """What one Hypothesis run of the machine did, and how it ended."""

    profile: str
    seed: int | None
    elapsed: float  # seconds
    stats: Stats
    error: Exception | None
    saved: list[tuple[Path, Schedule]]
    found_after: int | None = None  # examples run before the first failure came
    scope_tried: int = 0  # schedules of the small scope replayed first

    @property
    def examples(self) -> int:
        return self.stats.examples


def _no_event(label: str) -> None:
    return None


def _minimised(runner: ScheduleRunner, path: Path, schedule: Schedule) -> tuple[Path, Schedule]:
    """The saved schedule with every event it does not need deleted, saved over it."""
    events, failure = minimise(runner, schedule.events)
    if len(events) == len(schedule.events) or failure is None:
        return path, schedule
    first_failure(runner, events)  # once more, for its trace
    meta = {**schedule.meta, "shrunk_by_hypothesis": len(schedule.events)}
    meta["trace"] = list(runner.trace)
    smaller = dataclasses.replace(
        schedule, events=tuple(events), failure=f"{type(failure).__name__}: {failure}", meta=meta
    )
    smaller.save(path)
    print(report(f"minimised (from {len(schedule.events)} events)", smaller, path))
    return path, smaller


def explore(
    runner: ScheduleRunner,
    *,
    profile: str,
    seed: int | None = None,
    name: str = "schedule",
    failures_dir: Path = FAILURES,
    progress: Progress | None = None,
    shrink_budget: float = SHRINK_BUDGET,
    small_scope: bool = True,
    **overrides: object,
) -> Exploration:
    """The small scope's grid (:mod:`properties.scope`), then the machine over ``runner``
    under ``profile``; never raises the finding itself."""
    machine = bind(
        runner,
        name=name,
        seed=seed,
        profile=profile,
        failures_dir=failures_dir,
        progress=progress,
    )
    runner.warm()  # every kind's baseline now: computing one resets the journal
    runner.stats = Stats()
    began = time.monotonic()
    if small_scope:
        runner.on_event = _no_event  # not inside Hypothesis yet
        swept = scope.sweep(runner, name=name, profile=profile, failures_dir=failures_dir)
        if swept.finding is not None:
            print(
                report("failing schedule (small scope)", swept.finding.schedule, swept.finding.path)
            )
            return Exploration(
                profile=profile,
                seed=seed,
                elapsed=time.monotonic() - began,
                stats=runner.stats,
                error=swept.finding.error,
                saved=[_minimised(runner, swept.finding.path, swept.finding.schedule)],
                found_after=swept.finding.tried,
                scope_tried=swept.tried,
            )
        scope_tried = swept.tried
        runner.stats = Stats()  # the machine's own coverage, apart from the grid's
    else:
        scope_tried = 0
    error: Exception | None = None
    try:
        with shrinking_within(shrink_budget):
            run_state_machine_as_test(machine, settings=profile_settings(profile, **overrides))
    except Exception as exc:  # the shrunk failure (or a flaky one): the caller decides
        error = exc
    finally:
        runner.cleanup()
        runner.on_event = _no_event  # hypothesis.event fails outside a test
    saved = [_minimised(runner, path, schedule) for path, schedule in machine.saved]
    return Exploration(
        profile=profile,
        seed=seed,
        elapsed=time.monotonic() - began,
        stats=runner.stats,
        error=error,
        saved=saved,
        found_after=machine.found_after,
        scope_tried=scope_tried,
    )
