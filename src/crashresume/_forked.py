"""Process mode: every life runs in a forked child that really dies at its crash point.

The parent keeps the scenario's outside world (the ``ScenarioLog``). Each child inherits a
copy of it through ``os.fork``, runs one life, and reports back over a pipe: one record per
effect, written *before* ``effect`` returns (a pipe write is a system call, not a buffer), so
the record survives the child's death. At the crash point the child calls ``os._exit``: no
``finally`` block, ``with`` exit, ``atexit`` hook or buffered write of the subject runs, just
as when a real process is killed; a crash on any thread of the child ends all of them.
Subjects whose state lives in files, SQLite or a database server are judged by what they
actually made durable.

Records, each a length-prefixed pickle:

    ("effect", name, arg, key, result)   a new effect happened (key may be None)
    ("conflict", conflict)               a key came back with another name or arg
    ("start", empty)                     state() right after a restart was empty or not
    ("step", index)                      the life starts stepping input ``index``
    ("crash", calls, step)               the child is about to die at its crash point
    ("end", life)                        the life finished (completed or raised)
    ("died", description)                the subject ended the child itself (SystemExit, ...)
    ("raise", error)                     a CrashResumeError the parent must raise

This module forks and decodes; ``_pool`` decides when, and watches the clock.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import signal
import struct
import sys
import threading
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any, NoReturn

from crashresume._context import Conflict, Context, ScenarioLog
from crashresume._errors import CrashResumeError, IsolationError
from crashresume._faults import make_context
from crashresume._runner import Factory, Life, LifeSpec, describe_exception, live
from crashresume._scenarios import Point

CRASH_STATUS = 86  # exit status of a child killed at its crash point
_FATAL_STATUS = 87  # exit status of a child that could not even report its failure
_HEADER = struct.Struct("<I")  # length prefix of one record, in bytes
_SEND_LOCK = threading.Lock()  # one record at a time, whichever thread of the child sends


def _send(fd: int, record: tuple[Any, ...]) -> None:
    """Write one record to the parent; a pickling failure becomes an IsolationError record."""
    try:
        payload = pickle.dumps(record, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception as exc:
        error = IsolationError(
            f"process mode must send {record[0]!r} data to the parent, but it cannot be "
            f"pickled ({describe_exception(exc)}). Use plain data (str, int, tuples, lists, "
            "dicts) for effect args, results and state(), or use mode='inprocess'."
        )
        payload = pickle.dumps(("raise", error))
    view = memoryview(_HEADER.pack(len(payload)) + payload)
    with _SEND_LOCK:
        while view:
            written = os.write(fd, view)
            view = view[written:]


class _ForkedContext(Context):
    """A context whose records reach the parent and whose crash is ``os._exit``."""

    __slots__ = ("_fd",)

    def __init__(self, run_id: str, log: ScenarioLog, crash: Point | None, fd: int) -> None:
        super().__init__(run_id, log, crash)
        self._fd = fd
        self._forked = True

    def _sent(self, name: str, arg: Any, key: Hashable | None, result: Any) -> None:
        _send(self._fd, ("effect", name, arg, key, result))

    def _conflict(self, conflict: Conflict) -> None:
        super()._conflict(conflict)
        _send(self._fd, ("conflict", conflict))

    def _crash(self, calls: int, *, before: bool) -> NoReturn:
        _send(self._fd, ("crash", calls, self._step))
        os._exit(CRASH_STATUS)


def _child(factory: Factory, inputs: Sequence[Any], spec: LifeSpec, fd: int) -> NoReturn:
    status = 0
    try:
        ctx = make_context(_ForkedContext, spec.run_id, spec.log, spec.crash, spec.fault, fd)
        life = live(
            factory,
            inputs,
            ctx,
            restart=spec.restart,
            baseline=spec.baseline,
            on_start=lambda empty: _send(fd, ("start", empty)),
            on_step=lambda index: _send(fd, ("step", index)),
        )
        _send(fd, ("end", life))
    except CrashResumeError as exc:
        _send(fd, ("raise", exc))
    except BaseException as exc:  # SystemExit, KeyboardInterrupt: the subject ended itself
        try:
            _send(fd, ("died", describe_exception(exc)))
        except BaseException:
            status = _FATAL_STATUS
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        os._exit(status)


@dataclass(slots=True, kw_only=True)
class Child:
    """One forked life as the parent sees it while it runs."""

    pid: int
    fd: int  # the read end of its pipe
    spec: LifeSpec
    deadline: float | None  # time.monotonic() after which it is killed
    chunks: list[bytes] = field(default_factory=list)


def spawn(factory: Factory, inputs: Sequence[Any], spec: LifeSpec, deadline: float | None) -> Child:
    """Fork a child that runs one life and reports over a pipe."""
    for stream in (sys.stdout, sys.stderr):
        stream.flush()  # or the child would print the parent's buffered output again
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_fd)
        _child(factory, inputs, spec, write_fd)
    os.close(write_fd)
    return Child(pid=pid, fd=read_fd, spec=spec, deadline=deadline)


def kill(child: Child) -> None:
    """SIGKILL a child that ran out of time (it may have just exited: that is fine)."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(child.pid, signal.SIGKILL)


def _records(data: bytes) -> list[tuple[Any, ...]]:
    records = []
    offset = 0
    while offset + _HEADER.size <= len(data):
        (size,) = _HEADER.unpack_from(data, offset)
        start = offset + _HEADER.size
        if start + size > len(data):
            break  # a record cut short by a death mid-write: never acted on
        records.append(pickle.loads(data[start : start + size]))
        offset = start + size
    return records


def _describe_status(status: int) -> str:
    if os.WIFSIGNALED(status):
        return f"was killed by signal {os.WTERMSIG(status)}"
    return f"exited with status {os.waitstatus_to_exitcode(status)}"


def collect(child: Child, status: int, *, timed_out: str | None = None) -> Life:
    """Apply a finished child's records to its scenario's log and rebuild its ``Life``."""
    log = child.spec.log
    ended: Life | None = None
    crashed: tuple[int, int] | None = None
    start_empty: bool | None = None
    died: str | None = None
    stepping = -1
    for record in _records(b"".join(child.chunks)):
        tag = record[0]
        if tag == "effect":
            _, name, arg, key, result = record
            log.performed.append((name, arg))
            if key is not None:
                log.remote[key] = (name, arg, result)
        elif tag == "conflict":
            log.conflicts.append(record[1])
        elif tag == "start":
            start_empty = record[1]
        elif tag == "step":
            stepping = record[1]
        elif tag == "crash":
            crashed = (record[1], record[2])
        elif tag == "end":
            ended = record[1]
        elif tag == "died":
            died = record[1]
        elif tag == "raise":
            error = record[1]
            if not isinstance(error, CrashResumeError):
                raise IsolationError(f"a child sent {error!r} where an error was expected")
            raise error
    if ended is not None:
        return ended
    if crashed is not None:
        calls, step = crashed
        return Life(calls=calls, crash_step=step, start_empty=start_empty)
    if timed_out is not None:
        return Life(timed_out=timed_out, stepping=stepping, start_empty=start_empty)
    if died is None:
        died = f"the child process {_describe_status(status)} before it finished its inputs"
    return Life(error=died, start_empty=start_empty)
