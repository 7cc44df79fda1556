"""The old start of an overlap scenario: frozen at a boundary instead of killed, then woken.

A lease that expires does not stop the worker that held it: the worker is only slow (a long
GC pause, a stopped VM, a swapping host) and wakes up later, still believing it owns the
run, while the run's new owner has already gone on. ``FrozenStart`` plays that worker:

1. ``freeze()`` runs the subject until its crash point would be reached and holds it there:
   in process mode the child stops itself with ``SIGSTOP`` right after telling the parent
   (a real stopped process, every thread of it); in-process the start's thread waits on an
   event inside ``ctx.effect`` (threads the subject started keep running: process mode is
   the faithful one).
2. The caller runs the restart meanwhile, as an ordinary life.
3. ``wake()`` lets the old start go on: the effect call it stood in goes ahead, it finishes
   the input it was stepping, and then it is ended (its next effect call or its next input
   dies), as its next lease check or the supervisor would end it. It returns how it ended.

In process mode the old child's copy of the scenario's world is as old as its fork; on waking
it first receives the parent's current log over a second pipe, so a key its restart already
sent is known to it, as it would be to the real remote.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import pickle
import select
import signal
import sys
import threading
import time
from collections.abc import Sequence
from typing import Any, NoReturn, Protocol

from crashresume._context import Context, ScenarioLog, resume_running, stop_running
from crashresume._errors import CrashResumeError, IsolationError
from crashresume._forked import _HEADER, Child, _ForkedContext, _records, _send, collect
from crashresume._runner import Factory, Life, LifeSpec, describe_exception, live
from crashresume._scenarios import Point

_READ_SIZE = 1 << 16  # bytes per read from a pipe


class FrozenStart(Protocol):
    """An old start that is frozen at its point, woken later, then ended."""

    @property
    def frozen_step(self) -> int:
        """Index of the input it was stepping when it froze (-1: while make_agent ran)."""

    def freeze(self) -> Life | None:
        """Run until frozen (None), or the Life of a start that ended first or hung."""

    def wake(self) -> Life:
        """Let it finish the input it was stepping; how it ended."""

    def close(self) -> None:
        """End it wherever it is (idempotent)."""


def frozen_start(
    mode: str,
    factory: Factory,
    inputs: Sequence[Any],
    run_id: str,
    log: ScenarioLog,
    point: Point,
    timeout: float | None,
) -> FrozenStart:
    """The frozen old start of one overlap scenario, in ``mode``."""
    if mode == "process":
        return _ProcessStart(factory, inputs, run_id, log, point, timeout)
    return _ThreadStart(factory, inputs, run_id, log, point, timeout)


def _hung(timeout: float | None, how: str) -> str:
    return f"did not {how} within {timeout:g} s and was stopped"


class _FrozenContext(Context):
    """In-process: at its point the start's thread waits for the harness instead of dying."""

    __slots__ = ("bell", "frozen_step", "wake", "woken")

    def __init__(self, run_id: str, log: ScenarioLog, point: Point, bell: threading.Event):
        super().__init__(run_id, log, point)
        self.bell = bell  # rung when it freezes (and when the start ends)
        self.wake = threading.Event()
        self.woken = False
        self.frozen_step = -1

    def _crash(self, calls: int, *, before: bool) -> None:  # type: ignore[override]
        if self.woken or self._dead:
            super()._crash(calls, before=before)
        self.frozen_step = self._step
        self.bell.set()
        self.wake.wait()
        self.woken = True  # the effect call goes ahead from here
        resume_running(self)  # for threads it starts now (its restart's start has ended)

    def end_after_input(self, index: int) -> None:
        """``on_step``: once woken, the start steps nothing past the input it froze in."""
        if self.woken and index > self.frozen_step:
            super()._crash(self._calls, before=True)


class _ThreadStart:
    """In-process: the old start on a daemon thread of its own, parked inside ``effect``."""

    def __init__(
        self,
        factory: Factory,
        inputs: Sequence[Any],
        run_id: str,
        log: ScenarioLog,
        point: Point,
        timeout: float | None,
    ) -> None:
        self._timeout = timeout
        self._bell = threading.Event()
        self._ctx = _FrozenContext(run_id, log, point, self._bell)
        self._outcome: list[Life | BaseException] = []
        ctx = self._ctx

        def start() -> None:
            try:
                life = live(
                    factory, inputs, ctx, restart=False, baseline=False, on_step=ctx.end_after_input
                )
                self._outcome.append(life)
            except BaseException as exc:  # re-raised on the harness's thread
                self._outcome.append(exc)
            finally:
                self._bell.set()

        self._thread = threading.Thread(
            target=contextvars.copy_context().run,
            args=(start,),
            name=f"crashresume frozen start {run_id}",
            daemon=True,
        )

    @property
    def frozen_step(self) -> int:
        return self._ctx.frozen_step

    def _ended(self) -> Life | None:
        if not self._outcome:
            return None
        result = self._outcome[0]
        if isinstance(result, BaseException):
            raise result
        return result

    def freeze(self) -> Life | None:
        self._thread.start()
        if not self._bell.wait(self._timeout):
            return self._abandon("reach its freeze point")
        return self._ended()

    def wake(self) -> Life:
        self._bell.clear()
        self._ctx.wake.set()
        self._thread.join(self._timeout)
        ended = self._ended()
        return ended if ended is not None else self._abandon("finish its input after waking")

    def _abandon(self, how: str) -> Life:
        ctx = self._ctx
        ctx._stop()
        stop_running(ctx)
        ctx.wake.set()
        return Life(calls=ctx._calls, timed_out=_hung(self._timeout, how), stepping=ctx._step)

    def close(self) -> None:
        if not self._outcome:
            self._ctx._stop()
            self._ctx.wake.set()


class _FrozenForkedContext(_ForkedContext):
    """In a child: at its point the child tells the parent and stops itself (SIGSTOP)."""

    __slots__ = ("_sync_fd", "frozen_step", "woken")

    def __init__(self, run_id: str, log: ScenarioLog, point: Point, fd: int, sync_fd: int):
        super().__init__(run_id, log, point, fd)
        self._sync_fd = sync_fd
        self.woken = False
        self.frozen_step = -1

    def _crash(self, calls: int, *, before: bool) -> None:  # type: ignore[override]
        if self.woken:
            super()._crash(calls, before=before)
        self.frozen_step = self._step
        _send(self._fd, ("freeze", calls, self._step))
        os.kill(os.getpid(), signal.SIGSTOP)
        self.woken = True
        performed, remote = pickle.loads(_read_exactly(self._sync_fd))
        self._performed[:] = performed  # the world as it is now, restart included
        self._remote.clear()
        self._remote.update(remote)

    def end_after_input(self, index: int) -> None:
        _send(self._fd, ("step", index))
        if self.woken and index > self.frozen_step:
            super()._crash(self._calls, before=True)


def _read_exactly(fd: int) -> bytes:
    """One length-prefixed message from the parent."""
    data = b""
    size: int | None = None
    while size is None or len(data) < _HEADER.size + size:
        chunk = os.read(fd, _READ_SIZE)
        if not chunk:
            raise IsolationError("the harness closed the pipe of a frozen start")
        data += chunk
        if size is None and len(data) >= _HEADER.size:
            (size,) = _HEADER.unpack_from(data)
    return data[_HEADER.size :]


def _frozen_child(
    factory: Factory,
    inputs: Sequence[Any],
    run_id: str,
    log: ScenarioLog,
    point: Point,
    fd: int,
    sync_fd: int,
) -> NoReturn:
    status = 0
    try:
        ctx = _FrozenForkedContext(run_id, log, point, fd, sync_fd)
        life = live(
            factory, inputs, ctx, restart=False, baseline=False, on_step=ctx.end_after_input
        )
        _send(fd, ("end", life))
    except CrashResumeError as exc:
        _send(fd, ("raise", exc))
    except BaseException as exc:  # SystemExit, KeyboardInterrupt: the subject ended itself
        try:
            _send(fd, ("died", describe_exception(exc)))
        except BaseException:
            status = 1
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        os._exit(status)


class _ProcessStart:
    """Process mode: the old start in a forked child that really is stopped (SIGSTOP)."""

    def __init__(
        self,
        factory: Factory,
        inputs: Sequence[Any],
        run_id: str,
        log: ScenarioLog,
        point: Point,
        timeout: float | None,
    ) -> None:
        self._args = (factory, inputs, run_id, log, point)
        self._log = log
        self._timeout = timeout
        self._pid = 0
        self._fd = self._sync = -1
        self.frozen_step = -1

    def freeze(self) -> Life | None:
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        read_fd, write_fd = os.pipe()
        sync_read, sync_write = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(read_fd)
            os.close(sync_write)
            _frozen_child(*self._args, write_fd, sync_read)
        os.close(write_fd)
        os.close(sync_read)
        self._pid, self._fd, self._sync = pid, read_fd, sync_write
        data, open_ = self._read(frozen=True)
        frozen = next((r for r in _records(data) if r[0] == "freeze"), None)
        if frozen is None:  # it ended (or hung) before reaching the point
            return self._end(data, "reach its freeze point" if open_ else None)
        _, status = os.waitpid(pid, os.WUNTRACED)  # it stops itself right after the record
        if not os.WIFSTOPPED(status):  # killed from outside in between: it is just dead
            self._pid = 0
            self._close_pipes()
            return self._collect(data, status)
        self.frozen_step = frozen[2]
        self._collect(data, 0)  # what it did before freezing is part of the world now
        return None

    def wake(self) -> Life:
        os.kill(self._pid, signal.SIGCONT)
        payload = pickle.dumps((self._log.performed, self._log.remote))
        view = memoryview(_HEADER.pack(len(payload)) + payload)
        with contextlib.suppress(BrokenPipeError):  # it died meanwhile: read how, below
            while view:
                view = view[os.write(self._sync, view) :]
        data, open_ = self._read(frozen=False)
        life = self._end(data, "finish its input after waking" if open_ else None)
        if life.timed_out is not None and life.stepping < 0:  # its step records came before
            life.stepping = self.frozen_step
        return life

    def _read(self, *, frozen: bool) -> tuple[bytes, bool]:
        """Read until the freeze record (``frozen``) or the end of the pipe; True: timed out."""
        deadline = None if self._timeout is None else time.monotonic() + self._timeout
        data = b""
        while True:
            wait = None if deadline is None else max(0.0, deadline - time.monotonic())
            ready, _, _ = select.select([self._fd], [], [], wait)
            if not ready:
                return data, True
            chunk = os.read(self._fd, _READ_SIZE)
            if not chunk:
                return data, False
            data += chunk
            if frozen and any(record[0] == "freeze" for record in _records(data)):
                return data, False

    def _collect(self, data: bytes, status: int, timed_out: str | None = None) -> Life:
        _, _, run_id, log, point = self._args
        spec = LifeSpec(run_id=run_id, log=log, crash=point, restart=False, baseline=False)
        child = Child(pid=self._pid, fd=self._fd, spec=spec, deadline=None, chunks=[data])
        return collect(child, status, timed_out=timed_out)

    def _end(self, data: bytes, hung: str | None) -> Life:
        """Reap the child (killed first if it ``hung``) and rebuild how it ended."""
        if hung is not None:
            os.kill(self._pid, signal.SIGKILL)
        _, status = os.waitpid(self._pid, 0)
        self._pid = 0
        self._close_pipes()
        return self._collect(data, status, None if hung is None else _hung(self._timeout, hung))

    def _close_pipes(self) -> None:
        for fd in (self._fd, self._sync):
            if fd >= 0:
                os.close(fd)
        self._fd = self._sync = -1

    def close(self) -> None:
        if self._pid:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self._pid, signal.SIGKILL)
            with contextlib.suppress(ChildProcessError):
                os.waitpid(self._pid, 0)
            self._pid = 0
        self._close_pipes()
