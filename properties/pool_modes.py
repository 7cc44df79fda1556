"""The supervisor's other spawn modes, ``fork`` and ``exec``.

The schedules' supervisors all run ``--spawn pool``, so here each other mode runs on a
fresh supervisor of the world's class with the schedules' agents and mocks but no gates
(as :mod:`properties.pool_loop` does):

- ``pool_spawn``: ``--spawn fork`` and ``--spawn exec`` each take runs that crash once
  (``after_confirm`` of step 0, ``os._exit(1)``) to the end: every attempt in a process
  of its own (an exec'd one a fresh interpreter: the supervisor holds it as a ``Popen``;
  a forked one a child with no pipe), two attempts a run, never a pool worker or a spare,
  no process left once ``drain()`` returns. An ``exec`` supervisor refuses in-process
  transports (they cannot cross an ``exec``), and reads its workers' environment from
  what it was given (the crash plan is there, not in this process's environment). The
  modes are given as a command line gives them: strings of their own, not the interned
  literals (an ``is`` where ``==`` is meant then shows).

The waits on real time are for processes to do their work (:data:`LOOP_WAIT`), never to
expire anything.
"""

from __future__ import annotations

import os
from collections import Counter
from typing import TYPE_CHECKING, Final

from agent_runtime.crash import CrashPlan
from agent_runtime.errors import EXIT_CRASH_NOT_REACHED, EXIT_CRASHED, EXIT_DONE
from agent_runtime.supervisor.supervision import Supervisor
from agent_runtime.supervisor.workerpool import WorkerProcess

from .pilots import no_jitter
from .pool_loop import LOOP_POLL, LOOP_WAIT, Looping, create_runs, unfinished
from .pool_stop import shut_down
from .violations import Violation

if TYPE_CHECKING:
    from .pool_runner import PoolRunner

CRASH_POINT: Final = "after_confirm"  # step 0's: the attempt after it resumes at step 1
MODE_KINDS: Final = {"fork": ("provisioning", "support"), "exec": ("provisioning",)}


def as_given(word: str) -> str:
    """``word`` as a command line gives it: equal to the literal, never the same object."""
    return "".join(list(word))


def _spawn_supervisor(runner: PoolRunner, mode: str) -> Supervisor:
    """A ``mode`` supervisor whose workers crash once per run at :data:`CRASH_POINT`."""
    world = runner.world
    crash = CrashPlan(point=CRASH_POINT, seq=0)
    settings = world.settings.with_changes(crash=crash, poll=LOOP_POLL)
    if mode == "exec":  # a fresh interpreter: the seed's agent, the crash plan in its env
        ours = ("CRASH_AT", "CRASH_SEQ", "CLOUD_URL", "MODEL_URL")  # the settings' URLs
        env = {k: v for k, v in os.environ.items() if k not in ours}
        env.update(CRASH_AT=CRASH_POINT, CRASH_SEQ="0")
        agents = [a for a in world.agents if a.name == "provisioning"]
        supervisor = world.supervisor_class(
            runner.url,
            settings.with_changes(crash=CrashPlan()),
            spawn=as_given(mode),
            agents=agents,
            worker_env=env,
        )
    else:
        supervisor = world.supervisor_class(
            runner.url,
            settings,
            spawn=as_given(mode),
            agents=world.agents,
            worker_transports=world.setup,
        )
    supervisor.backoff = settings.run_backoff_rule(no_jitter)
    return supervisor


def _refuses_exec_transports(runner: PoolRunner) -> list[Violation]:
    world = runner.world
    try:
        supervisor = world.supervisor_class(
            runner.url,
            world.settings,
            spawn=as_given("exec"),
            agents=world.agents,
            worker_transports=world.setup,
        )
    except ValueError:
        return []
    shut_down(supervisor, "exec", [])
    return [
        Violation(
            "pool_spawn",
            None,
            None,
            "a supervisor with spawn=exec took in-process worker_transports: they are made "
            "in a forked worker and cannot reach an exec'd one; it must refuse them",
        )
    ]


def spawn_problems(runner: PoolRunner, mode: str) -> list[Violation]:
    """``drain()`` of a ``mode`` supervisor over runs that crash once each."""
    runs = create_runs(runner, f"{mode}-", MODE_KINDS[mode])
    try:
        supervisor = _spawn_supervisor(runner, mode)
    except ValueError as exc:
        return [Violation("pool_spawn", None, None, f"spawn={mode} refused: {exc}")]
    loop = Looping(supervisor)
    loop.start(supervisor.drain)
    finished = loop.join(LOOP_WAIT)
    if not finished:
        loop.abandon()
    problems: list[Violation] = []
    attempts = Counter(w.lease.run_id for w in loop.workers if w.lease is not None)
    left = unfinished(runner, runs)
    if not finished or left or attempts != Counter({r: 2 for r in runs}):
        problems.append(
            Violation(
                "pool_spawn",
                None,
                None,
                f"spawn={mode}: drain() {'returned' if finished else 'did not return'} with "
                f"runs not done {left or 'none'} and processes per run {dict(attempts)}: "
                "each run crashes once and ends done in its second process",
            )
        )
    problems += _own_processes(loop.workers, mode, len(runs))
    if finished:
        shut_down(supervisor, f"spawn={mode}", problems)
    return problems


def _own_processes(workers: list[WorkerProcess], mode: str, runs: int) -> list[Violation]:
    """Every attempt in a process of its own, of its mode, gone once its run ended: the
    first crashed (1), the second ended done (0; an exec'd one says 7, the crash it was
    told of not reached)."""
    wrong = [
        f"{w.pid} ({'pipe' if w.channel is not None else 'exec' if w.popen else 'fork'}, "
        f"exit {w.exit_code})"
        for w in workers
        if w.channel is not None
        or (w.popen is not None) != (mode == "exec")
        or w.exit_code not in (EXIT_CRASHED, EXIT_CRASH_NOT_REACHED if w.popen else EXIT_DONE)
    ]
    if not wrong and len(workers) == 2 * runs:
        return []
    return [
        Violation(
            "pool_spawn",
            None,
            None,
            f"spawn={mode}: {len(workers)} processes for {runs} runs of two attempts each, "
            f"these not a {mode}ed process of one attempt ending as it should: {wrong}",
        )
    ]


def mode_problems(runner: PoolRunner) -> list[Violation]:
    """Every check of this module."""
    problems = _refuses_exec_transports(runner)
    for mode in MODE_KINDS:
        problems += spawn_problems(runner, mode)
    return problems
