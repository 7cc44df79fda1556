"""The killing command's pool stage: the real supervisor and its pool, as CI runs them.

The in-process runner mimics the supervisor's claim; nothing it runs imports
``agent_runtime.supervisor``. So a mutant of the supervisor or its pool is judged here,
after the in-process stages passed, by what ``properties/test_pool.py`` runs under the
profile: the calm schedules through both runners (the real pool must give the mimic's
outcome and trace), the pool's own schedules under every invariant, then each fixed
schedule of :mod:`properties.pool_stories` (the story twice: it must replay the same).
Not shrunk; the first failure is the verdict.

The supervisor is built in this process and forks its pool workers from it, so they run
the modules this process imported (the mutated copy first on ``PYTHONPATH``); the worker
a ``restart`` starts by hand is a fresh interpreter that inherits that ``PYTHONPATH``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import Any

from hypothesis import Phase, given

from ..events import Event
from ..pool_runner import PoolRunner
from ..pool_stories import CALM, FIXED, STORMY, problem
from ..pool_strategies import calm_schedules, pool_schedules
from ..profiles import profile_settings
from ..runner import ScheduleRunner
from ..runners import InProcessRunner
from ..server import SuiteDatabase
from ..violations import Violation, Violations

NO_SHRINK = (Phase.explicit, Phase.reuse, Phase.generate, Phase.target)


class PoolFinding(AssertionError):
    """The real pool differs from the mimic, or a fixed schedule went otherwise."""


@dataclass
class PoolVerdict:
    error: Exception | None
    stage: str
    failing: list[list[Event]]  # the failing schedule, if one failed
    seconds: float


def _run(runner: ScheduleRunner, events: list[Event]) -> tuple[Any, list[str]]:
    try:
        outcome: Any = runner.replay(events)
    except (Violation, Violations) as exc:
        outcome = f"violation: {exc}"
    return outcome, list(runner.trace)


def pool_stage(inprocess: InProcessRunner, database: SuiteDatabase, *, profile: str) -> PoolVerdict:
    """Every pool check of ``profile`` until the first failure; never raises it."""
    began = time.monotonic()
    failing: list[list[Event]] = []
    pool = PoolRunner(database.url, server=database)
    stage = f"pool: calm schedules ({CALM[profile]})"
    try:
        pool.warm()

        @profile_settings(
            profile, max_examples=CALM[profile], stateful_step_count=10, phases=NO_SHRINK
        )
        @given(calm_schedules(max_events=8))
        def agree(events: list[Event]) -> None:
            fast, fast_trace = _run(inprocess, events)
            if isinstance(fast, str):  # the in-process stages passed: not the pool's doing
                raise PoolFinding(f"the in-process runner failed a calm schedule: {fast}")
            real, real_trace = _run(pool, events)
            if (fast_trace, fast) != (real_trace, real):
                failing.append(events)
                raise PoolFinding(
                    f"the real pool differs from the mimic\ninprocess: {fast_trace} {fast}"
                    f"\npool:      {real_trace} {real}"
                )

        @profile_settings(
            profile, max_examples=STORMY[profile], stateful_step_count=10, phases=NO_SHRINK
        )
        @given(pool_schedules(max_events=9))
        def holds(events: list[Event]) -> None:
            failing.append(events)
            pool.replay(events)  # a violation is the verdict as it is
            failing.pop()

        agree()
        stage = f"pool: pool schedules ({STORMY[profile]})"
        holds()
        for name, events in FIXED.items():
            stage = f"pool: fixed schedule {name!r}"
            failing.append(events)
            outcome, trace = _run(pool, events)
            found = problem(name, outcome, trace)
            if found is None and name == "story" and _run(pool, events) != (outcome, trace):
                found = "the story replayed otherwise"
            if found is not None:
                raise PoolFinding(found)
            failing.pop()
        stage = "pool: the supervisor's command, --once"
        pool.reset()  # no run left: the command claims nothing and exits at once
        found = _command_once(database.url)
        if found is not None:
            raise PoolFinding(found)
        error: Exception | None = None
        stage = (
            f"pool: {CALM[profile]} calm, {STORMY[profile]} pool, {len(FIXED)} fixed, "
            "the command once"
        )
    except Exception as exc:
        error = exc
    finally:
        pool.close()
    return PoolVerdict(error, stage, failing[-1:], time.monotonic() - began)


def _command_once(url: str) -> str | None:
    """``python -m agent_runtime.supervisor --once --metrics-port 0`` on an empty database
    (what an operator starts: the schedules build the Supervisor directly): it must serve
    its metrics, find nothing to claim and exit 0. What is wrong with it, or None."""
    command = [sys.executable, "-m", "agent_runtime.supervisor", "--once", "--metrics-port", "0"]
    env = {**os.environ, "DATABASE_URL": url}
    env.pop("METRICS_PORT", None)
    try:
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        return "the supervisor's command --once did not exit within 60s"
    said = done.stderr.strip().splitlines()
    if done.returncode != 0 or not any("metrics address=" in line for line in said):
        return f"the supervisor's command --once: exit {done.returncode}, said {said[-3:]}"
    return None
