"""The crash-schedule property: under any schedule the runtime keeps its invariants."""

from __future__ import annotations

import os
import random

import pytest

from agent_runtime.crash import CRASH_POINTS

from .machine import Exploration, explore
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
    print(
        f"properties: profile={result.profile} seed={result.seed} examples={result.examples} "
        f"events={result.stats.events} crashes={result.stats.crashes} "
        f"restarts={result.stats.restarts} {result.elapsed:.1f}s\n"
        f"  crashes per point: {result.stats.fired}\n  faults: {result.stats.faults}"
    )
    if result.error is not None:
        saved = "\n".join(f"  saved: {path}" for path, _ in result.saved)
        raise AssertionError(f"a schedule broke an invariant\n{saved}") from result.error
    assert result.stats.examples > 1, "the machine ran no example at all"


def test_the_ci_profile_reaches_every_crash_point_and_fault(ci_exploration: Exploration) -> None:
    fired = ci_exploration.stats.fired
    print(f"crashes fired per point: {fired}; faults: {ci_exploration.stats.faults}")
    assert [p for p in CRASH_POINTS if not fired.get(p)] == []
    assert [f for f in FAULT_KINDS if not ci_exploration.stats.faults.get(f)] == []
    assert ci_exploration.stats.restarts > 0
