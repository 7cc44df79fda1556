"""The in-process runner: every start on a thread of its own, watched by a per-start timeout.

A thread cannot be killed, so a start that hangs is *abandoned*: the harness marks its
context dead (every later effect call of that start, on any thread, raises
``SimulatedCrash`` and records nothing), runs its teardown from a helper thread (bounded by
the same timeout) so a framework can drop its global state, reports the start as timed out,
and goes on. The abandoned thread is a daemon: it never keeps the interpreter alive.

A start whose crash hit another thread (a framework's worker) is dead at once, as a real
process would be; its own thread gets ``CRASH_GRACE`` seconds to notice and unwind before it
is abandoned the same way (noted in the report, not a finding).

With ``timeout=None`` every start runs on the calling thread with no watchdog.
"""

from __future__ import annotations

import contextvars
import queue
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from crashresume._context import Context, stop_running
from crashresume._errors import SimulatedCrash
from crashresume._faults import make_context
from crashresume._runner import Factory, Holder, Life, LifeSpec, live, tear_down

DEFAULT_TIMEOUT = 120.0  # seconds one start may take before the harness stops it
CRASH_GRACE = 2.0  # seconds a start's thread may keep running after its start died elsewhere


@contextmanager
def quiet_thread_deaths() -> Iterator[None]:
    """A thread that ends with ``SimulatedCrash`` died with its process: print no traceback.

    Wraps ``threading.excepthook`` while ``conform`` runs; every other exception still
    reaches the hook that was installed before.
    """
    previous = threading.excepthook

    def hook(args: threading.ExceptHookArgs) -> None:
        if args.exc_type is not None and issubclass(args.exc_type, SimulatedCrash):
            return
        previous(args)

    threading.excepthook = hook
    try:
        yield
    finally:
        if threading.excepthook is hook:
            threading.excepthook = previous


class _StartThread:
    """A daemon thread that runs starts one after another (a thread per start is slow)."""

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()
        self._context = contextvars.copy_context()  # the caller's contextvars, for every start
        self.thread = threading.Thread(target=self._serve, name="crashresume start", daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while (job := self._jobs.get()) is not None:
            self._context.copy().run(job)

    def run(self, job: Callable[[], None]) -> None:
        self._jobs.put(job)

    def stop(self) -> None:
        self._jobs.put(None)


class InProcessRunner:
    """Every life in this process; the crash is a ``SimulatedCrash`` raised from ``effect``."""

    mode = "inprocess"

    def __init__(self, timeout: float | None = DEFAULT_TIMEOUT) -> None:
        self._timeout = timeout
        self._thread: _StartThread | None = None

    @property
    def timeout(self) -> float | None:
        """Seconds one start may take (None: no watchdog)."""
        return self._timeout

    def close(self) -> None:
        """Let the start thread end (an abandoned one ends when its start returns, if ever)."""
        if self._thread is not None:
            self._thread.stop()
            self._thread = None

    def life(self, factory: Factory, inputs: Sequence[Any], spec: LifeSpec) -> Life:
        ctx = make_context(Context, spec.run_id, spec.log, spec.crash, spec.fault)
        if self._timeout is None:
            return live(factory, inputs, ctx, restart=spec.restart, baseline=spec.baseline)
        timeout = self._timeout
        holder = Holder()
        outcome: list[Life | BaseException] = []
        bell = threading.Event()  # rung when the start ends, and when it dies on any thread
        ctx._on_death = bell.set

        def start() -> None:
            threading.current_thread().name = f"crashresume start {spec.run_id}"
            try:
                outcome.append(
                    live(
                        factory,
                        inputs,
                        ctx,
                        restart=spec.restart,
                        baseline=spec.baseline,
                        holder=holder,
                    )
                )
            except BaseException as exc:  # re-raised on the harness's thread below
                outcome.append(exc)
            finally:
                bell.set()

        if self._thread is None:
            self._thread = _StartThread()
        self._thread.run(start)
        rang = bell.wait(timeout)
        if rang and not outcome:  # died on some thread; give the start's own thread a moment
            deadline = time.monotonic() + CRASH_GRACE
            while not outcome and time.monotonic() < deadline:
                bell.clear()
                if outcome:
                    break
                bell.wait(max(0.0, deadline - time.monotonic()))
        if outcome:
            result = outcome[0]
            if isinstance(result, BaseException):
                raise result
            return result
        self._thread.stop()  # it ends if the start ever returns; the next start gets a new one
        self._thread = None
        return self._abandon(ctx, holder, timeout, crashed=rang)

    @staticmethod
    def _abandon(ctx: Context, holder: Holder, timeout: float, *, crashed: bool) -> Life:
        """Give up on a start whose thread does not return; tear it down from elsewhere."""
        ctx._stop()
        stop_running(ctx)
        notes: list[str] = []
        teardown = holder.take()
        if teardown is not None:
            failed: list[str | None] = []
            crash = SimulatedCrash(f"crashresume: {ctx.run_id} was abandoned by the harness")
            helper = threading.Thread(
                target=lambda: failed.append(tear_down(teardown, crash)),
                name=f"crashresume teardown {ctx.run_id}",
                daemon=True,
            )
            helper.start()
            helper.join(timeout)
            if helper.is_alive():
                notes.append(
                    f"{ctx.run_id}: close() of the abandoned start did not return within "
                    f"{timeout:g} s either; it was left running"
                )
            elif failed and failed[0] is not None:
                notes.append(f"{ctx.run_id}: close() of the abandoned start raised: {failed[0]}")
        if crashed:
            where = ctx._crash_thread.name if ctx._crash_thread is not None else "another thread"
            notes.append(
                f"{ctx.run_id}: the start died on thread {where!r}, but its own thread was "
                f"still running {CRASH_GRACE:g} s later (blocked waiting for the dead thread?); "
                "in-process the harness cannot end a thread, so it was abandoned. Make such "
                "waits check ctx.crashed, or use mode='process'."
            )
            return Life(calls=ctx._calls, crash_step=ctx._crash_step, notes=tuple(notes))
        how = f"did not finish within {timeout:g} s and was abandoned (its thread cannot be killed)"
        return Life(calls=ctx._calls, timed_out=how, stepping=ctx._step, notes=tuple(notes))
