"""One round of the nightly hunt in the pool mode (``python -m properties.nightly --mode pool``).

The state machine's rules are the mimic runners' stories; the pool mode's own events
(SIGKILL, SIGTERM and stalls of pool workers, the supervisor's hang-up and SIGTERM, a
rival supervisor) come from :func:`~properties.pool_strategies.pool_schedules`, each
schedule replayed through :class:`~properties.pool_runner.PoolRunner` and judged by every
invariant. A failing schedule is saved at once (``<name>-unshrunk-<digest>.json``), then
shrunk within the shrink budget and saved again (``<name>-<digest>.json``), with its
replay command (``--mode pool``).
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

import hypothesis
from hypothesis import given
from hypothesis.control import current_build_context

from .driving import Stats
from .events import POOL_OPS, Event, Schedule, program
from .machine import SHRINK_BUDGET, shrinking_within
from .pool_runner import PoolRunner
from .pool_strategies import pool_schedules
from .profiles import profile_settings
from .violations import Violation, Violations

MAX_EVENTS: Final = 14  # events per pool schedule (the nightly profile's machine takes 40)
# what the nightly summary counts of the pool mode's own doings
POOL_COUNTS: Final = (
    "pool worker reused",
    "pool worker crashed",
    "pool worker killed",
    "pool worker stalled",
    "pool worker SIGTERM",
    "supervisor hang-up",
    "supervisor SIGTERM",
    "rival sweep",
)


@dataclass(kw_only=True)
class Hunt:
    stats: Stats
    elapsed: float
    error: Exception | None = None
    saved: list[tuple[Path, Schedule]] = field(default_factory=list)

    @property
    def pool(self) -> dict[str, int]:
        """How often each of the pool's own doings happened this round."""
        counts = {name: self.stats.faults.get(name, 0) for name in POOL_COUNTS}
        counts.update({f"event {op}": self.stats.events_by_op.get(op, 0) for op in POOL_OPS})
        return counts


def hunt(runner: PoolRunner, *, examples: int, seed: int, name: str, failures_dir: Path) -> Hunt:
    """``examples`` pool schedules drawn from ``seed``; never raises the finding itself."""
    runner.warm()
    runner.stats = Stats()
    began = time.monotonic()
    result = Hunt(stats=runner.stats, elapsed=0.0)
    unshrunk: list[tuple[Path, Schedule]] = []

    @hypothesis.seed(seed)
    @profile_settings("nightly", max_examples=examples)
    @given(pool_schedules(max_events=MAX_EVENTS))
    def one(events: list[Event]) -> None:
        try:
            runner.replay(events)
        except (Violation, Violations) as exc:
            final = current_build_context().is_final
            if final:
                result.saved.append(_save(events, exc, name, seed, failures_dir, final))
            elif not unshrunk:  # saved at once: no timeout can hide it
                unshrunk.append(_save(events, exc, name, seed, failures_dir, final))
            raise

    try:
        with shrinking_within(SHRINK_BUDGET):
            one()
    except Exception as exc:  # the shrunk finding: the caller reports it
        result.error = exc
    result.elapsed = time.monotonic() - began
    result.stats = runner.stats
    result.saved = result.saved or unshrunk
    return result


def _save(
    events: list[Event], exc: BaseException, name: str, seed: int, directory: Path, final: bool
) -> tuple[Path, Schedule]:
    schedule = Schedule(
        events=tuple(events), name=name, seed=seed, profile="nightly",
        failure=f"{type(exc).__name__}: {exc}", meta={"runner": "pool"},
    )  # fmt: skip
    digest = hashlib.sha1(json.dumps([e.to_json() for e in events]).encode()).hexdigest()
    stem = name if final else f"{name}-unshrunk"
    path = schedule.save(directory / f"{stem}-{digest[:8]}.json")
    print(
        f"{'shrunk' if final else 'failing'} pool schedule: {schedule.failure}\n"
        f"{program(schedule.events)}\nsaved to {path}\n"
        f"replay: python -m properties.replay {path} --mode pool"
    )
    return path, schedule
