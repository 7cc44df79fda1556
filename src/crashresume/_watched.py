"""The in-process scenario loop, run on a start thread and watched from the caller's.

Handing every start to a thread of its own and waiting for it costs two thread wake-ups per
life, which on a quiet (or virtualised) machine is most of the time of a fast subject. So
``WatchedExecutor`` moves the whole serial loop (next spec, the life, ``done``) onto one
start thread, where the lives run inline one after another, and the caller's thread only
watches: the start thread writes each life's deadline into a slot, without waking anyone,
and the caller sleeps until the earliest moment that deadline can be due (a whole
``timeout`` when no life is running: the next one's deadline is at least that far away).

A life past its deadline is abandoned exactly as ``InProcessRunner`` abandons one (its
context is dead, its teardown runs from a helper thread), its timed-out ``Life`` is added to
its scenario, and a new start thread takes the loop over from there; the old one, if its
life ever returns, sees that it was replaced and ends without touching anything. A start
that dies on another thread rings the caller, which gives it ``CRASH_GRACE`` seconds to
come back, as ``InProcessRunner`` does (one that dies on its own thread and swallows the
crash, then hangs, is abandoned at its deadline instead). Single lives (``life()``, the
Hypothesis mode) still go through ``InProcessRunner``.
"""

from __future__ import annotations

import contextvars
import functools
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from crashresume._context import Context
from crashresume._faults import make_context
from crashresume._plan import R, SerialExecutor
from crashresume._runner import Factory, Holder, live
from crashresume._watchdog import CRASH_GRACE, InProcessRunner


@dataclass(slots=True)
class _Watch:
    """The life the start thread is running now."""

    ctx: Context
    holder: Holder
    deadline: float  # time.monotonic() past which the life is abandoned
    generation: int  # the start thread running it
    thread: int  # its ident
    crashed: bool = False  # it died on another thread: the deadline is now a grace


class _Loop:
    """The serial loop's state, advanced by whichever start thread is current."""

    def __init__(
        self,
        factory: Factory,
        inputs: Sequence[Any],
        runs: Sequence[R],
        done: Callable[[R], Sequence[R]],
        timeout: float,
    ) -> None:
        self.factory = factory
        self.inputs = inputs
        self.pending: list[Any] = list(reversed(runs))
        self.done = done
        self.timeout = timeout
        self.run: Any = None  # the scenario whose lives run now
        self.cond = threading.Condition()
        self.generation = 0  # bumped when a start thread is replaced, or the loop stopped
        self.watch: _Watch | None = None
        self.finished = False
        self.error: BaseException | None = None
        self.wakeups = 0  # times the caller's thread woke while the loop ran
        self.base = contextvars.copy_context()  # the caller's contextvars, for every start

    def start_thread(self) -> None:
        generation = self.generation
        thread = threading.Thread(
            target=self.base.copy().run,
            args=(self._drive, generation),
            name="crashresume start",
            daemon=True,
        )
        thread.start()

    def _next_spec(self) -> Any:
        while True:
            if self.run is not None:
                spec = self.run.next_spec()
                if spec is not None:
                    return spec
                self.pending.extend(reversed(self.done(self.run)))
                self.run = None
            if not self.pending:
                return None
            self.run = self.pending.pop()

    def _drive(self, generation: int) -> None:
        try:
            while self.generation == generation and (spec := self._next_spec()) is not None:
                threading.current_thread().name = f"crashresume start {spec.run_id}"
                ctx = make_context(Context, spec.run_id, spec.log, spec.crash, spec.fault)
                holder = Holder()
                with self.cond:
                    if self.generation != generation:
                        return  # stopped by the caller
                    deadline = time.monotonic() + self.timeout
                    watch = _Watch(ctx, holder, deadline, generation, threading.get_ident())
                    self.watch = watch
                ctx._on_death = functools.partial(self._died, watch)
                life = self.base.copy().run(
                    live,
                    self.factory,
                    self.inputs,
                    ctx,
                    restart=spec.restart,
                    baseline=spec.baseline,
                    holder=holder,
                )
                with self.cond:
                    if self.generation != generation:
                        return  # abandoned meanwhile: the caller added its life instead
                    self.watch = None
                    self.run.add(life)
            with self.cond:
                if self.generation == generation:
                    self.finished = True
                    self.cond.notify()
        except BaseException as exc:  # re-raised on the caller's thread
            with self.cond:
                if self.generation == generation:
                    self.error = exc
                    self.cond.notify()

    def _died(self, watch: _Watch) -> None:
        """The start died on some thread: its own thread has a grace to come back.

        A death on the start's own thread wakes no one (that thread is unwinding already,
        and waking the caller on every crash would cost a hand-over again): should the
        subject swallow it and hang, the start is abandoned at its deadline.
        """
        with self.cond:
            if not watch.crashed:
                watch.crashed = True
                if threading.get_ident() != watch.thread:
                    watch.deadline = min(watch.deadline, time.monotonic() + CRASH_GRACE)
                    self.cond.notify()

    def watch_over(self) -> None:
        """Until the loop ends: abandon every life that runs past its deadline."""
        while True:
            with self.cond:
                while True:
                    if self.error is not None:
                        raise self.error
                    if self.finished:
                        return
                    watch, now = self.watch, time.monotonic()
                    if watch is not None and watch.deadline <= now:
                        break
                    self.cond.wait(self.timeout if watch is None else watch.deadline - now)
                    self.wakeups += 1
                self.generation += 1  # the old start thread, if it ever returns, ends
                self.watch = None
            # Abandoned (or dead elsewhere past its grace): as InProcessRunner would report it.
            life = InProcessRunner._abandon(
                watch.ctx, watch.holder, self.timeout, crashed=watch.crashed
            )
            self.run.add(life)
            self.start_thread()

    def stop(self) -> None:
        with self.cond:
            self.generation += 1


class WatchedExecutor(SerialExecutor):
    """``SerialExecutor`` whose loop runs on a start thread watched by the caller's."""

    def __init__(self, runner: InProcessRunner) -> None:
        super().__init__(runner)
        self._timeout = runner.timeout
        self.wakeups = 0  # the caller's wake-ups in the last execute (tests count them)

    def execute(
        self,
        factory: Factory,
        inputs: Sequence[Any],
        runs: Sequence[R],
        done: Callable[[R], Sequence[R]],
    ) -> None:
        if self._timeout is None:  # every start on the calling thread, unwatched
            super().execute(factory, inputs, runs, done)
            return
        loop = _Loop(factory, inputs, runs, done, self._timeout)
        loop.start_thread()
        try:
            loop.watch_over()
        finally:
            loop.stop()
            self.wakeups = (
                loop.wakeups
            )  # an interrupted caller: the start thread stops after its life
