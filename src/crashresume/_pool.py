"""Process mode's scheduler: up to N forked lives at once, each with a deadline.

The parent stays single-threaded (forking from a threaded process can deadlock the child):
one ``selectors`` loop reads every running child's pipe, kills a child whose start ran past
its timeout (SIGKILL), reaps children that exited, and starts the next life of a scenario
as soon as its previous one ended. Scenarios are independent (each has its own run id, log
and durable files), so ``workers`` of them run side by side; the lives of one scenario
always run one after another.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from crashresume._errors import IsolationError, UsageError
from crashresume._forked import Child, collect, kill, spawn
from crashresume._plan import OneLife, Runnable
from crashresume._runner import Factory, Life, LifeSpec

R = TypeVar("R", bound=Runnable)
_READ_SIZE = 1 << 16  # bytes per read from a pipe
_REAP_POLL = 0.05  # seconds between checks on a child that closed its pipe but still runs


class ProcessPool:
    """Every life in a forked child (``mode="process"``), ``workers`` scenarios at a time."""

    mode = "process"

    def __init__(self, workers: int, timeout: float | None) -> None:
        if not hasattr(os, "fork"):
            raise UsageError(
                "mode='process' needs os.fork, which this platform lacks; use mode='inprocess'"
            )
        self._workers = workers
        self._timeout = timeout

    def close(self) -> None:
        """Nothing to release: every child is reaped before ``execute`` returns."""

    def life(self, factory: Factory, inputs: Sequence[Any], spec: LifeSpec) -> Life:
        """Run one life in a child and wait for it (the ``Runner`` protocol)."""
        one = OneLife(spec)
        self.execute(factory, inputs, [one], lambda run: ())
        if one.life is None:
            raise IsolationError(f"process mode ran no life for {spec.run_id!r}")
        return one.life

    def execute(
        self,
        factory: Factory,
        inputs: Sequence[Any],
        runs: Sequence[R],
        done: Callable[[R], Sequence[R]],
    ) -> None:
        """Run every scenario of ``runs`` (and those ``done`` returns) to its end."""
        pending = list(reversed(runs))  # a stack: a scenario's follow-ups run next
        selector = selectors.DefaultSelector()
        running: dict[int, tuple[Child, R]] = {}  # pipe fd -> child
        reaping: list[tuple[Child, R, str | None]] = []  # pipe closed, not yet exited

        def start(run: R) -> None:
            spec = run.next_spec()
            if spec is None:
                follow = done(run)
                pending.extend(reversed(follow))
                return
            deadline = None if self._timeout is None else time.monotonic() + self._timeout
            child = spawn(factory, inputs, spec, deadline)
            running[child.fd] = (child, run)
            selector.register(child.fd, selectors.EVENT_READ)

        def close(child: Child) -> None:
            selector.unregister(child.fd)
            del running[child.fd]
            os.close(child.fd)

        def finish(child: Child, run: R, status: int, timed_out: str | None) -> None:
            run.add(collect(child, status, timed_out=timed_out))
            start(run)

        try:
            while pending or running or reaping:
                while pending and len(running) + len(reaping) < self._workers:
                    start(pending.pop())
                if not (running or reaping):
                    continue
                for key, _ in selector.select(self._wait(running, reaping)):
                    child, run = running[key.fd]
                    chunk = os.read(key.fd, _READ_SIZE)
                    if chunk:
                        child.chunks.append(chunk)
                    else:
                        close(child)
                        reaping.append((child, run, None))
                now = time.monotonic()
                for child, run in list(running.values()):
                    if child.deadline is not None and now >= child.deadline:
                        kill(child)
                        close(child)
                        reaping.append((child, run, self._how()))
                still: list[tuple[Child, R, str | None]] = []
                for child, run, timed_out in reaping:
                    pid, status = os.waitpid(child.pid, os.WNOHANG)
                    if pid == 0:
                        if child.deadline is not None and now >= child.deadline:
                            kill(child)
                            timed_out = timed_out or self._how()
                        still.append((child, run, timed_out))
                    else:
                        finish(child, run, status, timed_out)
                reaping[:] = still
        finally:
            for child, _ in list(running.values()):
                kill(child)
                close(child)
                reaping.append((child, _, None))
            for child, _, _ in reaping:
                with contextlib.suppress(ChildProcessError):
                    os.waitpid(child.pid, 0)
            selector.close()

    def _how(self) -> str:
        return f"did not finish within {self._timeout:g} s and was killed (SIGKILL)"

    @staticmethod
    def _wait(
        running: dict[int, tuple[Child, Any]],
        reaping: list[tuple[Child, Any, str | None]],
    ) -> float | None:
        """How long the selector may block: until the next deadline, or briefly to reap."""
        deadlines = [child.deadline for child, _ in running.values() if child.deadline is not None]
        wait = None if not deadlines else max(0.0, min(deadlines) - time.monotonic())
        if reaping:
            wait = _REAP_POLL if wait is None else min(wait, _REAP_POLL)
        return wait
