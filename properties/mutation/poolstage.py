"""The killing command's pool stage: the real supervisor and its pool, as CI runs them.

The in-process runner mimics the supervisor's claim; nothing it runs imports
``agent_runtime.supervisor``. So a mutant of the supervisor or its pool is judged here,
after the in-process stages passed, by what ``properties/test_pool.py`` runs under the
profile: the calm schedules through both runners (the real pool must give the mimic's
outcome and trace), the pool's own schedules under every invariant, then each fixed
schedule of :mod:`properties.pool_stories` (the story twice: it must replay the same),
then the stories of supervisor states of :mod:`properties.pool_states`, each with its settings,
the supervisor's own ``serve()``/``drain()`` loops and timers (:mod:`properties.pool_loop`)
and its command ``--once``; before all of them, the corners no schedule reaches (a few
seconds, deterministic): its ``fork`` and ``exec`` modes, its pool kept whole as idle
workers, an unopened spare and itself die, a worker that cannot open
(:mod:`properties.pool_modes`, :mod:`properties.pool_kept`, :mod:`properties.pool_open`),
its stop of stalled workers (:mod:`properties.pool_stall`).
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
from pathlib import Path

from hypothesis import Phase, given

from agent_runtime.errors import EXIT_USAGE
from agent_runtime.observe.metrics import MULTIPROC_ENV
from agent_runtime.store.journal import Journal

from ..events import Event
from ..pool_bug import bug_problems, unheld_problems
from ..pool_kept import kept_problems
from ..pool_modes import mode_problems
from ..pool_open import open_problems
from ..pool_runner import PoolRunner
from ..pool_serve import loop_problems
from ..pool_size import size_problems
from ..pool_stall import stall_problems
from ..pool_states import SETTINGS as STATES
from ..pool_states import state_problem
from ..pool_stories import CALM, FIXED, STORMY, problem
from ..pool_strategies import calm_schedules, pool_schedules
from ..profiles import profile_settings
from ..runners import InProcessRunner, outcome_and_trace
from ..server import SuiteDatabase

SUPPORT_ADDRESS = "examples.support:agent"  # an agent other than the default
COMMAND_STAGE = "pool: the supervisor's command, --once"
NO_SHRINK = (Phase.explicit, Phase.reuse, Phase.generate, Phase.target)


class PoolFinding(AssertionError):
    """The real pool differs from the mimic, or a fixed schedule went otherwise."""


@dataclass
class PoolVerdict:
    error: Exception | None
    stage: str
    failing: list[list[Event]]  # the failing schedule, if one failed
    seconds: float


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
            fast, fast_trace = outcome_and_trace(inprocess, events)
            if isinstance(fast, str):  # the in-process stages passed: not the pool's doing
                raise PoolFinding(f"the in-process runner failed a calm schedule: {fast}")
            real, real_trace = outcome_and_trace(pool, events)
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

        # the corners no schedule reaches first: a few seconds, deterministic
        stage = "pool: the spawn modes, the pool kept whole, a stop of stalled workers, bugs"
        cornered = [
            *mode_problems(pool),
            *kept_problems(pool),
            *open_problems(pool),
            *stall_problems(pool),
            *bug_problems(pool),
            *unheld_problems(pool),
            *size_problems(pool),
        ]
        if cornered:
            raise PoolFinding("\n".join(str(v) for v in cornered))
        stage = f"pool: calm schedules ({CALM[profile]})"
        agree()
        stage = f"pool: pool schedules ({STORMY[profile]})"
        holds()
        for name, events in FIXED.items():
            stage = f"pool: fixed schedule {name!r}"
            failing.append(events)
            outcome, trace = outcome_and_trace(pool, events)
            found = problem(name, outcome, trace)
            if (
                found is None
                and name == "story"
                and outcome_and_trace(pool, events) != (outcome, trace)
            ):
                found = "the story replayed otherwise"
            if found is not None:
                raise PoolFinding(found)
            failing.pop()
        for name in STATES:  # the supervisor states the draws never reach (class 21)
            stage = f"pool: state story {name!r}"
            found = state_problem(pool, name)
            if found is not None:
                raise PoolFinding(found)
        stage = "pool: the supervisor's own loop (serve, drain, its timers)"
        looped = loop_problems(pool)
        if looped:
            raise PoolFinding("\n".join(str(v) for v in looped))
        stage = COMMAND_STAGE
        pool.reset()  # no run left but the one the command is given
        found = _command_once(database.url, pool)
        if found is not None:
            raise PoolFinding(found)
        error: Exception | None = None
        stage = (
            f"pool: {CALM[profile]} calm, {STORMY[profile]} pool, {len(FIXED)} fixed, "
            f"{len(STATES)} state stories, the loop, the command once, after the modes and the "
            "stalled stop"
        )
    except Exception as exc:
        error = exc
    finally:
        pool.close()
    return PoolVerdict(error, stage, failing[-1:], time.monotonic() - began)


def command_stage(database: SuiteDatabase) -> PoolVerdict:
    """The pool stage's last step alone (``check --command-only``: tests of what only the
    command reads, its options, without the schedules before it)."""
    began = time.monotonic()
    found = _command_once(database.url)
    error = None if found is None else PoolFinding(found)
    return PoolVerdict(error, COMMAND_STAGE, [], time.monotonic() - began)


def _command_once(url: str, pool: PoolRunner | None = None) -> str | None:
    """``python -m agent_runtime.supervisor --once`` (what an operator starts: the
    schedules build the Supervisor directly), its metrics port given once by
    ``--metrics-port 0`` and once by ``METRICS_PORT=0``: it must serve its metrics, exit 0
    and remove its private metrics directory. What is wrong with it, or None. The first
    is also given ``--agent`` (the support example) and finds nothing to claim: its first
    line must name that agent, and only it, as the one it serves. The second, with
    ``pool`` (a reset runner), is given one pending run of the seed's agent and the
    runner's mocks: its signals installed as in production, it claims the run, its pool
    worker finishes it, and its stop hears that worker's SIGCHLD on its wake-up pipe; the
    run must be done, and no worker SIGKILLed (each dies by the stop's SIGTERM: a forked
    worker does not keep the supervisor's handlers). And a bad ``--prune-after`` is one
    clear line and exit 2, no traceback."""
    env = {**os.environ, "DATABASE_URL": url}
    bad = [sys.executable, "-m", "agent_runtime.supervisor", "--once", "--prune-after", "soon"]
    done = subprocess.run(bad, env=env, capture_output=True, text=True, timeout=60)
    if done.returncode != EXIT_USAGE or "Traceback" in done.stderr:
        return f"--prune-after soon: exit {done.returncode}, said {done.stderr.splitlines()[-3:]}"
    named = ["--agent", SUPPORT_ADDRESS]
    for flag, env_port in ((["--metrics-port", "0", *named], None), ([], "0")):
        command = [sys.executable, "-m", "agent_runtime.supervisor", "--once", *flag]
        env = {**os.environ, "DATABASE_URL": url}
        env.pop(MULTIPROC_ENV, None)  # a private directory, which the command must remove
        env.pop("METRICS_PORT", None)
        if env_port is not None:
            env["METRICS_PORT"] = env_port
        how = " ".join(flag) or f"METRICS_PORT={env_port}"
        run = None
        if pool is not None and not flag:
            run = "once0"
            Journal(pool.conn).create_run(run, "provisioning", None)
            env.update(CLOUD_URL=pool.settings.cloud_url, MODEL_URL=pool.settings.model_url)
            how += f", given run {run}"
        try:
            done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=60)
        except subprocess.TimeoutExpired:
            return f"the supervisor's command --once ({how}) did not exit within 60s"
        said = done.stderr.strip().splitlines()
        served = [line for line in said if "metrics address=" in line]
        if done.returncode != 0 or not served:
            return (
                f"the supervisor's command --once ({how}): exit {done.returncode}, said {said[-3:]}"
            )
        serves = {word for line in said if " supervisor lease=" in line for word in line.split()}
        wanted = "agents=support" if named[0] in flag else "agents=provisioning"
        if wanted not in serves:
            return f"the supervisor's command --once ({how}) does not say {wanted}: {said[:2]}"
        left = [
            word.split("=", 1)[1] for word in served[0].split() if word.startswith("directory=")
        ]
        if any(Path(d).exists() for d in left):
            return f"the supervisor's command --once ({how}) left its metrics directory {left}"
        killed = [line for line in said if "worker-" in line and "code=-9" in line]
        if killed:  # a worker its stop SIGKILLed: it kept the supervisor's SIGTERM handler
            return f"the supervisor's command --once ({how}) SIGKILLed its workers: {killed}"
        if run is not None and pool is not None:
            status = (got := Journal(pool.conn).get_run(run)) and got.status
            if status != "done":
                return f"the supervisor's command --once ({how}) left {run} {status}: {said[-3:]}"
    return None
