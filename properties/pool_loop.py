"""The Supervisor's own loop and timers, run where production runs them (gap class 20).

The schedules drive a pool supervisor pass by pass (:meth:`PoolWorld.sweep` calls its
``reap()``, ``watch()`` and ``sweep()``, its watchdog's interval forced): its ``serve()``
and ``drain()`` loops and the timers in them are not theirs.
:func:`properties.pool_serve.loop_problems` runs them, each on a fresh supervisor of the
world's class (tests plant a broken one there) with the schedules' agents, mocks and pool
workers, but no gates:

- ``pool_serve`` (:mod:`properties.pool_serve`): ``serve()`` (not ``--once``) on a thread
  claims, finishes, keeps passing while idle without spinning (after a wake too), keeps
  a pool worker for the next run, survives a database crash, and stops at its SIGTERM;
- ``pool_drain``: ``drain()`` on a thread returns, and only once every run is done and
  no worker holds one;
- ``pool_timer``: passes of ``sweep()`` at every eighth of a poll of a frozen
  ``time.monotonic`` (:func:`frozen_monotonic`: nothing sleeps): the watchdog checks at
  every half poll and only then, the look for unserved runs once a poll;
- ``pool_stop`` (:mod:`properties.pool_stop`): each of these supervisors' workers ends
  by its stop's SIGTERM, none SIGKILLed after the grace.

The waits on real time here are for processes to do their work (guarded by
:data:`LOOP_WAIT`), never to expire anything.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from agent_runtime.crash import CrashPlan
from agent_runtime.store.journal import Journal
from agent_runtime.supervisor import supervision, unserved
from agent_runtime.supervisor.supervision import Supervisor
from agent_runtime.supervisor.workerpool import Transports, WorkerProcess

from . import sqlfile
from .api_corners import AGED
from .pilots import no_jitter
from .pool_stop import shut_down
from .violations import Violation

if TYPE_CHECKING:
    from .pool_runner import PoolRunner

LOOP_POLL: Final = 0.25  # seconds: the serve and drain supervisors' poll (idle passes)
LOOP_WAIT: Final = 60.0  # seconds a loop may take to finish its runs on a loaded machine
IDLE_PASSES: Final = 3  # passes with nothing busy after which serve() must still run
LOOP_KINDS: Final = ("provisioning", "support")  # one run of each
SETTLE: Final = 0.002  # seconds between looks at a process the runner killed
IDLE_WAIT: Final = 0.8  # the share of a poll an idle serve() waits at least once in two


class FrozenMonotonic:
    """The ``time`` the supervisor's modules read: ``monotonic()`` stands still until set."""

    def __init__(self, at: float) -> None:
        self.now = at

    def monotonic(self) -> float:
        return self.now


@contextlib.contextmanager
def frozen_monotonic(at: float, clock: FrozenMonotonic | None = None) -> Iterator[FrozenMonotonic]:
    """``time.monotonic()`` of :mod:`~agent_runtime.supervisor.supervision` and
    :mod:`~agent_runtime.supervisor.unserved` frozen at ``at`` (whole seconds, so that
    every eighth-poll sum is exact) until the block ends; ``clock``: one of the caller's."""
    clock = clock or FrozenMonotonic(at)
    modules = (supervision, unserved)
    saved = [vars(m)["time"] for m in modules]
    for m in modules:
        vars(m)["time"] = clock
    try:
        yield clock
    finally:
        for m, real in zip(modules, saved, strict=True):
            vars(m)["time"] = real


@dataclass
class Looping:
    """A supervisor's loop on a thread, and what its passes saw (written by that thread)."""

    supervisor: Supervisor
    passes: int = 0
    reconnects: int = 0  # times it reconnected after a failed pass
    idle_passes: int = 0  # passes after which no worker held a run
    idle_at: list[float] = field(default_factory=list)  # time.monotonic() of each of them
    workers: list[WorkerProcess] = field(default_factory=list)  # every one it started
    returned: list[object] = field(default_factory=list)
    thread: threading.Thread | None = None

    def start(self, loop: Callable[[], object]) -> None:
        sup = self.supervisor
        sweep = sup.sweep

        def counted() -> list[WorkerProcess]:
            started = sweep()
            self.passes += 1
            self.idle_passes += not sup.busy
            if not sup.busy:
                self.idle_at.append(time.monotonic())
            self.workers += [w for w in sup.workers.values() if w not in self.workers]
            return started

        def body() -> None:
            try:
                self.returned.append(loop())
            except BaseException as exc:  # reported as what it returned
                self.returned.append(exc)

        reconnect = sup._reconnect

        def reconnected() -> None:
            self.reconnects += 1
            reconnect()

        sup.sweep = counted  # type: ignore[method-assign]
        sup._reconnect = reconnected  # type: ignore[method-assign]
        self.thread = threading.Thread(target=body, name="pool-loop", daemon=True)
        self.thread.start()

    @property
    def alive(self) -> bool:
        return self.thread is not None and self.thread.is_alive()

    def join(self, timeout: float) -> bool:
        """Whether the loop returned within ``timeout`` seconds."""
        assert self.thread is not None
        self.thread.join(timeout)
        return not self.thread.is_alive()

    def abandon(self) -> None:
        """End a loop that does not: its next reap raises; then stop what it started."""

        def refuse() -> list[object]:
            raise RuntimeError("abandoned by the property suite")

        sup = self.supervisor
        sup.stopping = True
        sup.reap = refuse  # type: ignore[method-assign,assignment]
        if self.join(LOOP_WAIT):
            del sup.reap
            if not sup.conn.closed:  # its shutdown did not get that far
                with contextlib.suppress(Exception):
                    sup.shutdown()
        for proc in self.workers:  # a loop stuck for good: its workers at least
            if proc.poll() is None:
                proc.signal(signal.SIGCONT)
                proc.signal(signal.SIGKILL)
                with contextlib.suppress(ChildProcessError):
                    os.waitpid(proc.pid, 0)


def loop_supervisor(
    runner: PoolRunner,
    poll: float,
    spawn: str = "pool",
    transports: Transports | None = None,
    max_workers: int | None = None,
) -> Supervisor:
    """A supervisor of the world's class, its agents and worker setup (or ``transports``),
    without gates (with ``max_workers``, or the world's)."""
    world = runner.world
    size = world.settings.max_workers if max_workers is None else max_workers
    settings = world.settings.with_changes(crash=CrashPlan(), poll=poll, max_workers=size)
    supervisor = world.supervisor_class(
        runner.url,
        settings,
        spawn=spawn,
        agents=world.agents,
        worker_transports=transports or world.setup,
    )
    supervisor.backoff = settings.run_backoff_rule(no_jitter)
    return supervisor


def create_runs(
    runner: PoolRunner, prefix: str, kinds: tuple[str, ...] = LOOP_KINDS, *, reset: bool = True
) -> list[str]:
    """One pending run of each of ``kinds``, named ``<prefix><i>`` (after a reset), each
    at generation :data:`AGED` (a run claimed many times: generations the interpreter does
    not share, so that an identity test of two equal ones is caught)."""
    if reset:
        runner.reset()
    names = {a.name for a in runner.world.agents}
    runs = []
    for i, kind in enumerate(kinds):
        agent = runner._agent_names[kind]
        assert agent in names, (agent, names)
        run = f"{prefix}{i}"
        Journal(runner.conn).create_run(run, agent, None)
        sqlfile.rows(runner.conn, "age_run", {"run": run, "generation": AGED})
        runs.append(run)
    return runs


def unfinished(runner: PoolRunner, runs: list[str]) -> dict[str, str]:
    """The runs of ``runs`` not done, and their status."""
    rows = {row["id"]: row for row in sqlfile.rows(runner.conn, "leases")}
    return {r: str(rows[r]["status"]) for r in runs if rows[r]["status"] != "done"}


def wait_until(ready: Callable[[], bool], timeout: float = LOOP_WAIT) -> bool:
    deadline = time.monotonic() + timeout
    while not ready():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def drain_problems(runner: PoolRunner) -> list[Violation]:
    """``drain()`` on a thread returns, and only once every run is done and no worker
    holds one."""
    runs = create_runs(runner, "drain")
    loop = Looping(loop_supervisor(runner, LOOP_POLL))
    loop.start(loop.supervisor.drain)
    problems: list[Violation] = []
    idle_since: list[int] = []  # the idle passes counted once every run was done

    def settled() -> bool:
        if not loop.alive:
            return True
        if not idle_since and not unfinished(runner, runs):
            idle_since.append(loop.idle_passes)
        return bool(idle_since) and loop.idle_passes >= idle_since[0] + IDLE_PASSES

    wait_until(settled)
    if loop.alive:
        left = unfinished(runner, runs)
        loop.abandon()
        problems.append(
            Violation(
                "pool_drain",
                None,
                None,
                f"drain() had not returned after {loop.passes} passes ({loop.idle_passes} "
                f"with no worker holding a run; runs not done: {left or 'none'}): it returns "
                "once no run is claimable and no worker holds one",
            )
        )
    else:
        sup = loop.supervisor
        held = {w.pid: w.lease.run_id for w in sup.busy if w.lease is not None}
        left = unfinished(runner, runs)
        if held or left or loop.returned != [None]:
            problems.append(
                Violation(
                    "pool_drain",
                    None,
                    None,
                    f"drain() returned {loop.returned} while workers held {held} and runs "
                    f"{left} were not done: it returns only once no worker holds a run",
                )
            )
        sup.stopping = True
        shut_down(sup, "drain()", problems)
    return problems


def timer_problems(runner: PoolRunner) -> list[Violation]:
    """Passes at every eighth of a poll of a frozen clock: the watchdog checks twice a
    poll (at each half), the unserved look once a poll."""
    runner.reset()
    sup = loop_supervisor(runner, runner.world.settings.poll)
    poll = sup.settings.poll
    checks: list[float] = []
    looks: list[float] = []
    check, look = sup.watchdog.check, sup.unserved.look
    problems: list[Violation] = []
    try:
        with frozen_monotonic(float(int(time.monotonic()) + 1000)) as clock:
            t0 = clock.now

            def check_now(conn: Any, busy: Any) -> Any:
                checks.append(clock.now - t0)
                return check(conn, busy)

            def look_now(conn: Any) -> Any:
                looks.append(clock.now - t0)
                return look(conn)

            sup.watchdog.check = check_now  # type: ignore[method-assign]
            sup.unserved.look = look_now  # type: ignore[method-assign]
            for eighth in range(17):  # eighths: an interval of 1-1.5 s differs from 1.5
                clock.now = t0 + eighth * poll / 8
                sup.sweep()
    finally:
        sup.stopping = True
        shut_down(sup, "timers'", problems)
    eighths = [q * poll / 8 for q in range(17)]
    for what, seen, every in (("the watchdog checked", checks, 4), ("it looked", looks, 8)):
        want = eighths[::every]
        if seen != want:
            problems.append(
                Violation(
                    "pool_timer",
                    None,
                    None,
                    f"passes at every eighth of a poll ({poll:g}s) of a frozen clock: {what} at "
                    f"{seen}, not at {want} (the watchdog twice a poll, the unserved look "
                    "once a poll)",
                )
            )
    return problems


def passes_until(supervisor: Supervisor, done: Callable[[], bool]) -> bool:
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


def reap_until_gone(
    supervisor: Supervisor, pids: Collection[int], timeout: float = LOOP_WAIT
) -> bool:
    """Reap (no sweep in between) until the supervisor let every one of ``pids`` go;
    False if ``timeout`` seconds passed first."""
    deadline = time.monotonic() + timeout
    while any(pid in supervisor.workers for pid in pids):
        if time.monotonic() > deadline:
            return False
        supervisor.reap()
        time.sleep(SETTLE)
    return True


def kill_and_reap(supervisor: Supervisor, proc: WorkerProcess) -> bool:
    """SIGKILL ``proc`` and reap until the supervisor let it go (no sweep in between)."""
    proc.signal(signal.SIGKILL)
    return reap_until_gone(supervisor, [proc.pid])


def hand_out(
    runner: PoolRunner, sup: Supervisor, prefix: str, wrong: Callable[[str], None]
) -> tuple[str, WorkerProcess] | None:
    """A new provisioning run ``<prefix>0``, and the worker one pass hands it to (None,
    said through ``wrong``, if none took it)."""
    (run,) = create_runs(runner, prefix, ("provisioning",), reset=False)
    sup.reap()
    sup.sweep()
    holder = next((w for w in sup.busy if w.lease and w.lease.run_id == run), None)
    if holder is None:
        wrong(f"run {run} was not handed out while workers {sorted(sup.workers)} were idle")
        return None
    return run, holder


def ends_done(
    runner: PoolRunner, sup: Supervisor, run: str, wrong: Callable[[str], None], after: str
) -> bool:
    """Passes until ``run`` is done; False, said through ``wrong``, if it is not within
    :data:`LOOP_WAIT` (``after``: what came before, for the message)."""
    if passes_until(sup, lambda: not unfinished(runner, [run])):
        return True
    wrong(f"{run} not done in {LOOP_WAIT:g}s after {after}")
    return False
