"""A pool supervisor's stop while its workers cannot take the stop's SIGTERM.

A pool worker has no SIGTERM handler and dies at once, so the schedules' stops never
wait: the grace of ``shutdown()`` and the SIGKILL after it matter only for a worker that
cannot take a signal (stopped by SIGSTOP or a debugger, or inside the kernel). Here two
runs are held by two pool workers of a fresh supervisor, both stalled with SIGSTOP, the
first on its run's second attempt (its first worker was SIGKILLed at once and the run
handed on); then ``shutdown()`` runs under a frozen clock that moves as far as each of
its waits asks and a microsecond more (as a real wait overshoots: the stop's deadline is
never read exactly) (:func:`~properties.pool_loop.frozen_monotonic`), and halfway
through the grace the first worker is continued (the clock stands still until it is
gone: a slow machine's scheduling is not the stop's to judge):

- ``pool_grace``: the continued worker ends by the stop's SIGTERM, never SIGKILLed; the
  other is SIGKILLed when the documented grace (:data:`GRACE`, ARCHITECTURE: "SIGTERM to
  every worker, busy or idle, up to 5 s before SIGKILL") has passed on the stop's clock,
  not a wait before and not a wait after, and reaped within :data:`REAP_WITHIN` of it; the
  stop returns, and both runs are handed back claimable at once (a stop's SIGTERM is the
  supervisor's own doing, not a death to back off from, on any attempt). A stop that
  still waits at twice the grace, or spins without waiting, is stuck.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from typing import TYPE_CHECKING, Final

from agent_runtime.store.journal import Journal
from agent_runtime.supervisor.supervision import Supervisor
from agent_runtime.supervisor.workerpool import WorkerProcess

from .pool_loop import (
    LOOP_POLL,
    LOOP_WAIT,
    FrozenMonotonic,
    create_runs,
    frozen_monotonic,
    kill_and_reap,
    loop_supervisor,
)
from .pool_stop import shut_down
from .violations import Violation

if TYPE_CHECKING:
    from .pool_runner import PoolRunner

GRACE: Final = 5.0  # seconds: the stop's grace before SIGKILL, as ARCHITECTURE gives it
REAP_WITHIN: Final = 0.5  # seconds of the stop's clock from its SIGKILL to its return
SPIN: Final = 100_000  # reads of the clock with no wait between them: a stop spinning
REAL_WAIT: Final = 0.001  # seconds each of the stop's waits really waits
OVERSHOOT: Final = 1e-6  # seconds each wait lasts past what it asked
STOP_STEP: Final = 0.05  # seconds the stop waits between its reaps (its _wait)


class StopStuck(Exception):
    """The stop waited past twice its grace, or spun without waiting."""


class StopClock(FrozenMonotonic):
    """Moves only by :meth:`advance` (sums kept exact to the nanosecond)."""

    def __init__(self, at: float) -> None:
        super().__init__(at)
        self.start = at
        self.elapsed = 0.0
        self.reads = 0
        self.waits = 0

    def monotonic(self) -> float:
        self.reads += 1
        if self.reads > SPIN:
            raise StopStuck(f"the stop read its clock {SPIN} times without waiting")
        return self.now

    def advance(self, seconds: float) -> None:
        self.reads = 0
        self.waits += 1
        self.elapsed += seconds
        self.now = self.start + round(self.elapsed, 9) + self.waits * OVERSHOOT


def stall_problems(runner: PoolRunner) -> list[Violation]:
    """Stop a supervisor whose two busy workers are stalled (see the module)."""
    runs = create_runs(runner, "stall")
    sup = loop_supervisor(runner, LOOP_POLL)
    problems: list[Violation] = []

    def wrong(what: str) -> list[Violation]:
        return [*problems, Violation("pool_grace", None, None, what)]

    held = _stalled(sup, runs)
    attempts = [r.attempts for run in runs if (r := Journal(runner.conn).get_run(run))]
    if isinstance(held, str) or attempts != [2, 1]:
        _abandon(sup)
        return wrong(f"{held}" if isinstance(held, str) else f"attempts {attempts}, not [2, 1]")
    found = _stop(sup, held)
    if found is not None:
        return wrong(found)
    journal = Journal(runner.conn)
    for run in runs:
        r = journal.get_run(run)
        if r is None or r.owner is not None or r.backing_off:
            problems.append(
                Violation(
                    "pool_grace",
                    run,
                    None,
                    f"after the stop {run} (attempt {r and r.attempts}) is held by "
                    f"{r and r.owner} or backs off until {r and r.lease_expires_at}: a stop "
                    "hands every run back, claimable at once",
                )
            )
    return problems


def _stalled(sup: Supervisor, runs: list[str]) -> list[WorkerProcess] | str:
    """The two runs' workers, both stopped, the first's on its run's second attempt."""
    sup.reap()
    sup.sweep()
    busy = {w.lease.run_id: w for w in sup.busy if w.lease is not None}
    if set(busy) != set(runs):
        return f"the first pass handed out {sorted(busy)}, not {runs}"
    busy[runs[1]].signal(signal.SIGSTOP)
    if not kill_and_reap(sup, busy[runs[0]]):
        return f"the supervisor never let go of its SIGKILLed worker {busy[runs[0]].pid}"
    sup.sweep()  # a first death: the run goes again at once, to a new worker
    again = [w for w in sup.busy if w.lease is not None and w.lease.run_id == runs[0]]
    if len(again) != 1:
        return f"the pass after its worker died handed {runs[0]} to {len(again)} workers"
    again[0].signal(signal.SIGSTOP)
    return [again[0], busy[runs[1]]]


def _stop(sup: Supervisor, held: list[WorkerProcess]) -> str | None:
    """``shutdown()`` under the stop clock; what went wrong, or None."""
    first, second = held
    clock = StopClock(float(int(time.monotonic()) + 1000))
    kills: dict[int, float] = {}
    for proc in held:
        send = proc.signal

        def recording(signum: int, proc: WorkerProcess = proc, send=send) -> None:  # type: ignore[no-untyped-def]
            if signum == signal.SIGKILL:
                kills.setdefault(proc.pid, clock.now)
            send(signum)

        proc.signal = recording  # type: ignore[method-assign]
    real_wait = sup._wait
    continued: list[float] = []  # real time of the first's SIGCONT

    def stepped(timeout: float) -> None:
        real_wait(min(timeout, REAL_WAIT))
        waiting = continued and time.monotonic() - continued[0] < LOOP_WAIT
        if waiting and first.pid in sup.workers:
            return  # the clock waits for the continued worker to go
        clock.advance(timeout)
        if not continued and clock.now >= clock.start + GRACE / 2:
            first.signal(signal.SIGCONT)
            continued.append(time.monotonic())
        if clock.now > clock.start + 2 * GRACE:
            raise StopStuck(f"the stop still waits {clock.now - clock.start:g}s into it")

    sup._wait = stepped  # type: ignore[method-assign]
    try:
        with frozen_monotonic(clock.start, clock):
            heard = shut_down(sup, "stalled", [])  # its SIGKILL is wanted here: judged below
    except Exception as exc:
        del sup._wait
        _abandon(sup)
        return f"the stop of stalled workers failed: {type(exc).__name__}: {exc}"
    del sup._wait
    ended = clock.now - clock.start
    codes = [heard.get((p.lease.run_id, p.lease.generation)) for p in held if p.lease]
    killed = [kills.get(first.pid), kills.get(second.pid)]
    killed_at = None if killed[1] is None else round(killed[1] - clock.start, 9)
    if (
        codes != [-signal.SIGTERM, -signal.SIGKILL]
        or killed[0] is not None
        or killed_at is None
        or not GRACE <= killed_at < GRACE + STOP_STEP + 10 * OVERSHOOT
        or ended - GRACE > REAP_WITHIN
    ):
        return (
            f"a stop with two stalled workers, the first continued at {GRACE / 2:g}s: their "
            f"runs ended {codes}, SIGKILLs at {[k and round(k - clock.start, 9) for k in killed]}"
            f"s, the stop returned at {ended:g}s; wanted [-15, -9], the second alone "
            f"SIGKILLed at the first of its waits past {GRACE:g}s, the stop back within "
            f"{REAP_WITHIN:g}s of it"
        )
    return None


def _abandon(sup: Supervisor) -> None:
    """Whatever a failed stop left (one that returned closed all of it): its workers
    killed and waited for, its ends closed."""
    for proc in list(sup.workers.values()):
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(proc.pid, 0)
        proc.close()
    sup.workers.clear()
    for close in (sup.conn.close, lambda: os.close(sup._wake_r), lambda: os.close(sup._wake_w)):
        with contextlib.suppress(Exception):
            close()
