"""The supervisor's other spawn modes, and its pool kept whole when idle workers die.

The schedules' supervisors all run ``--spawn pool`` and their deaths are of busy workers,
so three corners of :mod:`agent_runtime.supervisor` no schedule reaches are run here,
each on a fresh supervisor of the world's class with the schedules' agents and mocks but
no gates (as :mod:`properties.pool_loop` does):

- ``pool_spawn``: ``--spawn fork`` and ``--spawn exec`` each take runs that crash once
  (``after_confirm`` of step 0, ``os._exit(1)``) to the end: every attempt in a process
  of its own (an exec'd one a fresh interpreter: the supervisor holds it as a ``Popen``;
  a forked one a child with no pipe), two attempts a run, never a pool worker or a spare,
  no process left once ``drain()`` returns. An ``exec`` supervisor refuses in-process
  transports (they cannot cross an ``exec``), and reads its workers' environment from
  what it was given (the crash plan is there, not in this process's environment). The
  modes are given as a command line gives them: strings of their own, not the interned
  literals (an ``is`` where ``==`` is meant then shows);
- ``pool_kept``: a pool supervisor starts one worker per claimed run and nothing more (a
  run whose id no worker would take, written straight into the table, is failed, not
  handed out); the workers that took the runs are the ones still there, open and idle,
  once the runs are done (a pool worker serves run after run); an idle worker that dies
  (SIGKILL) is said (``worker-gone``) and replaced at the next pass, the pool keeping its
  size; the next run goes to an open worker, not to the replacement still opening; once
  every open worker is busy a spare is started, and a spare that dies before it opened is
  said, not replaced, and no other spare is tried until a worker opens again.

The waits on real time are for processes to do their work (:data:`LOOP_WAIT`), never to
expire anything.
"""

from __future__ import annotations

import os
import signal
import time
from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING, Final

from agent_runtime.crash import CrashPlan
from agent_runtime.errors import EXIT_CRASH_NOT_REACHED, EXIT_CRASHED, EXIT_DONE
from agent_runtime.store import db
from agent_runtime.supervisor.supervision import Supervisor
from agent_runtime.supervisor.workerpool import WorkerProcess

from . import sqlfile
from .pilots import no_jitter
from .pool_hearing import hearing
from .pool_loop import LOOP_POLL, LOOP_WAIT, Looping, create_runs, loop_supervisor, unfinished
from .pool_stop import shut_down
from .violations import Violation

if TYPE_CHECKING:
    from .pool_runner import PoolRunner

CRASH_POINT: Final = "after_confirm"  # step 0's: the attempt after it resumes at step 1
MODE_KINDS: Final = {"fork": ("provisioning", "support"), "exec": ("provisioning",)}
SETTLE: Final = 0.002  # seconds between looks at a process the runner killed
BAD_ID: Final = "kept\abell"  # a run id no worker would take (a control character)


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


# -- the pool kept whole ----------------------------------------------------------------------


def _passes_until(supervisor: Supervisor, done: Callable[[], bool]) -> bool:
    """Passes (reap, sweep) until ``done()``; False if :data:`LOOP_WAIT` passed first."""
    deadline = time.monotonic() + LOOP_WAIT
    while True:
        supervisor.reap()
        supervisor.sweep()
        if done():
            return True
        if time.monotonic() > deadline:
            return False
        supervisor._wait(0.05)


def kill_and_reap(supervisor: Supervisor, proc: WorkerProcess) -> bool:
    """SIGKILL ``proc`` and reap until the supervisor let it go (no sweep in between)."""
    proc.signal(signal.SIGKILL)
    deadline = time.monotonic() + LOOP_WAIT
    while proc.pid in supervisor.workers:
        if time.monotonic() > deadline:
            return False
        supervisor.reap()
        time.sleep(SETTLE)
    return True


def kept_problems(runner: PoolRunner) -> list[Violation]:
    """A pool supervisor's workers as idle ones and an unopened spare die."""
    runs = create_runs(runner, "kept", MODE_KINDS["fork"])
    supervisor = loop_supervisor(runner, LOOP_POLL, as_given("pool"))
    problems: list[Violation] = []
    stopped: list[WorkerProcess] = []

    def wrong(what: str) -> None:
        problems.append(Violation("pool_kept", None, None, what))

    with hearing(lambda: 0) as said:
        try:
            _kept(runner, supervisor, runs, stopped, wrong, said)
        finally:
            for proc in stopped:
                proc.signal(signal.SIGCONT)
            shut_down(supervisor, "pool", problems)
    return problems


def _kept(
    runner: PoolRunner,
    sup: Supervisor,
    runs: list[str],
    stopped: list[WorkerProcess],
    wrong: Callable[[str], None],
    said: list[tuple[int, str]],
) -> None:
    db.run(runner.conn, "create_run", {"run": BAD_ID, "agent": "provisioning", "input": None})
    sup.reap()
    sup.sweep()
    first = set(sup.workers)
    if len(first) != len(runs):
        return wrong(
            f"the first pass over {len(runs)} pending runs (and one whose id no worker would "
            f"take) started {len(first)} pool workers: one per claimed run, no spare before "
            "any worker opened"
        )
    statuses = {row["id"]: row["status"] for row in sqlfile.rows(runner.conn, "statuses")}
    if statuses.get(BAD_ID) != "failed":
        wrong(f"a run whose id no worker would take is {statuses.get(BAD_ID)}, not failed")

    def settled() -> bool:
        idle = all(w.ready and w.idle for w in sup.workers.values())
        return idle and not unfinished(runner, runs)

    if not _passes_until(sup, settled):
        left = unfinished(runner, runs)
        return wrong(f"runs {left} not done, or workers not idle, in {LOOP_WAIT:g}s")
    size = len(sup.workers)
    if not first <= set(sup.workers) or any(w.channel is None for w in sup.workers.values()):
        return wrong(
            f"after {len(runs)} runs the pool holds workers {sorted(sup.workers)}, "
            f"{sum(w.channel is None for w in sup.workers.values())} of them without a pipe, "
            f"not those that took the runs {sorted(first)}: a pool worker stays, open and "
            "idle, for the next run"
        )
    victim = next(iter(sup.workers.values()))
    if not kill_and_reap(sup, victim):
        return wrong(f"the supervisor never let go of its SIGKILLed idle worker {victim.pid}")
    if not any(line.startswith(f"worker-gone pid={victim.pid} code=-9") for _, line in said):
        wrong(f"an idle worker's death (SIGKILL, pid {victim.pid}) was not said: worker-gone")
    sup.sweep()
    if len(sup.workers) != size:
        return wrong(
            f"after an idle worker of a pool of {size} died, the next pass left {len(sup.workers)} "
            "workers: a dead pool worker is replaced, the pool keeps its size"
        )
    # one run more, while the replacement may not have opened: an open worker takes it
    (one,) = create_runs(runner, "next", ("provisioning",), reset=False)
    sup.reap()
    open_idle = [w.pid for w in sup.workers.values() if w.idle and w.ready]
    unopened = [w.pid for w in sup.workers.values() if w.idle and not w.ready]
    sup.sweep()
    taker = next((w for w in sup.busy if w.lease and w.lease.run_id == one), None)
    if taker is None or (open_idle and taker.pid in unopened):
        return wrong(
            f"run {one} went to {taker and taker.pid} though workers {open_idle} were open "
            f"and idle ({unopened} not open yet): a run goes to an open worker first"
        )
    taker.signal(signal.SIGSTOP)  # busy until the end, as the others will be
    stopped.append(taker)
    # every worker busy and stalled: the supervisor starts a spare; it dies unopened
    idle = [w for w in sup.workers.values() if w.idle]
    for proc in idle:
        proc.signal(signal.SIGSTOP)
        stopped.append(proc)
    more = create_runs(runner, "busy", ("provisioning",) * len(idle), reset=False)
    count = len(sup.workers)
    sup.reap()
    sup.sweep()
    spares = [w for w in sup.workers.values() if w.idle]
    if any(not w.lease or w.lease.run_id not in more for w in idle) or len(spares) != 1:
        return wrong(
            f"with its {len(idle)} idle workers handed {len(more)} runs, every open worker "
            f"busy, the supervisor kept {len(spares)} spares: one while there is room"
        )
    spare = spares[0]
    if not kill_and_reap(sup, spare):
        return wrong(f"the supervisor never let go of its SIGKILLed spare {spare.pid}")
    if not any(line.startswith(f"worker-gone pid={spare.pid} code=-9") for _, line in said):
        wrong(f"an unopened spare's death (SIGKILL, pid {spare.pid}) was not said: worker-gone")
    for _ in range(2):
        sup.reap()
        sup.sweep()
    if len(sup.workers) != count or spare.pid in sup.workers:
        wrong(
            f"a spare died before it opened, yet two passes later there are "
            f"{len(sup.workers)} workers, not {count}: it is not replaced, and no other "
            "spare is tried until a worker opens again"
        )
    for proc in stopped:
        proc.signal(signal.SIGCONT)
    stopped.clear()
    if not _passes_until(sup, lambda: not unfinished(runner, [*runs, one, *more])):
        left = unfinished(runner, [*runs, one, *more])
        wrong(f"runs {left} not done in {LOOP_WAIT:g}s once resumed")
    return None


def mode_problems(runner: PoolRunner) -> list[Violation]:
    """Every check of this module."""
    problems = _refuses_exec_transports(runner)
    for mode in MODE_KINDS:
        problems += spawn_problems(runner, mode)
    return problems + kept_problems(runner)
