"""The crash-schedule property: under any schedule the runtime keeps its invariants."""

from __future__ import annotations

import os
import random

import pytest

from .events import GATES, OPS, POOL_OPS
from .exploring import Exploration, explore
from .profiles import active_profile
from .progress import Progress
from .runners import InProcessRunner

FAULT_KINDS = (
    "cloud fail_before",
    "cloud drop_after",
    "cloud latency",
    "model malformed",
    "model unknown_tool",
    "model invalid_args",
    "database connection dropped",
)
# every kind the machine has (a race is placed by the small scope's race stories, a thaw by
# its hung stories)
EVENTS = tuple(op for op in OPS if op not in (*POOL_OPS, "race", "race_claim", "thaw"))
# an operator acts, and is refused, mid-step (properties.operators)
OPERATOR_ACTIONS = ("operator cancel", "operator retry", "operator retry refused")


def _seed(profile: str) -> int | None:
    """ci is derandomized; dev and nightly draw a seed (or take PROPERTIES_SEED) and log it."""
    if profile == "ci":
        return None
    configured = os.environ.get("PROPERTIES_SEED")
    return int(configured) if configured else random.SystemRandom().getrandbits(32)


def test_crash_schedules_keep_every_invariant(
    request: pytest.FixtureRequest, inprocess_runner: InProcessRunner
) -> None:
    profile = active_profile()
    if profile == "ci":
        result: Exploration = request.getfixturevalue("ci_exploration")
    else:
        seed = _seed(profile)
        print(f"properties: profile={profile} seed={seed}")
        progress = Progress(f"properties {profile} seed={seed}")
        try:
            result = explore(inprocess_runner, profile=profile, seed=seed, progress=progress)
        finally:
            progress.close()
    s = result.stats
    print(
        f"properties: profile={result.profile} seed={result.seed} examples={result.examples} "
        f"events={s.events} crashes={s.crashes} restarts={s.restarts} "
        f"db_crashes={s.db_crashes} zombies={s.zombies} small_scope={result.scope_tried} "
        f"{result.elapsed:.1f}s\n"
        f"  crashes per point: {s.fired}\n  faults: {s.faults}"
    )
    if result.error is not None:
        saved = "\n".join(f"  saved: {path}" for path, _ in result.saved)
        raise AssertionError(f"a schedule broke an invariant\n{saved}") from result.error
    assert result.stats.examples > 1, "the machine ran no example at all"


def test_the_ci_profile_reaches_every_crash_point_and_fault(ci_exploration: Exploration) -> None:
    stats = ci_exploration.stats
    print(f"crashes fired per point: {stats.fired}; faults: {stats.faults}")
    # every gate of a step, and a retry's backoff wait (where a worker sleeps mid-step)
    assert [p for p in GATES if not stats.fired.get(p)] == []
    assert [f for f in FAULT_KINDS if not stats.faults.get(f)] == []
    assert stats.restarts > 0
    assert stats.db_crashes > 0 and stats.zombies > 0
    assert [e for e in EVENTS if not stats.events_by_op.get(e)] == []
    assert [a for a in OPERATOR_ACTIONS if not stats.faults.get(a)] == []
