"""Process mode: every life runs in a forked child that really dies at its crash point.

The parent keeps the scenario's outside world (the ``ScenarioLog``). Each child inherits a
copy of it through ``os.fork``, runs one life, and reports back over a pipe: one record per
effect, written *before* ``effect`` returns (a pipe write is a system call, not a buffer), so
the record survives the child's death. At the crash point the child calls ``os._exit``: no
``finally`` block, ``with`` exit, ``atexit`` hook or buffered write of the subject runs, just
as when a real process is killed. Subjects whose state lives in files, SQLite or a database
server are judged by what they actually made durable.

Records, each a length-prefixed pickle:

    ("effect", name, arg, key, result)   a new effect happened (key may be None)
    ("conflict", conflict)               a key came back with another name or arg
    ("start", empty)                     state() right after a restart was empty or not
    ("crash", calls, step)               the child is about to die at its crash point
    ("end", life)                        the life finished (completed or raised)
    ("died", description)                the subject ended the child itself (SystemExit, ...)
    ("raise", error)                     a CrashResumeError the parent must raise
"""

from __future__ import annotations

import contextlib
import os
import pickle
import struct
import sys
from collections.abc import Hashable, Sequence
from typing import Any, NoReturn

from crashresume._context import Context, ScenarioLog
from crashresume._errors import CrashResumeError, IsolationError, UsageError
from crashresume._runner import Factory, Life, describe_exception, live
from crashresume._scenarios import Point

CRASH_STATUS = 86  # exit status of a child killed at its crash point
_FATAL_STATUS = 87  # exit status of a child that could not even report its failure
_HEADER = struct.Struct("<I")  # length prefix of one record, in bytes
_READ_SIZE = 1 << 16  # bytes per read from the pipe


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
    while view:
        written = os.write(fd, view)
        view = view[written:]


class _ForkedContext(Context):
    """A context whose records reach the parent and whose crash is ``os._exit``."""

    __slots__ = ("_fd", "_sent_conflicts", "_sent_effects")

    def __init__(self, run_id: str, log: ScenarioLog, crash: Point | None, fd: int) -> None:
        super().__init__(run_id, log, crash)
        self._fd = fd
        self._sent_effects = len(log.performed)
        self._sent_conflicts = len(log.conflicts)

    def effect(
        self,
        name: str,
        arg: Any,
        key: Hashable | None = None,
        *,
        perform: Any = None,
    ) -> Any:
        result = Context.effect(self, name, arg, key, perform=perform)
        self._flush(key, result)
        return result

    def _flush(self, key: Hashable | None, result: Any) -> None:
        performed = self._performed
        if len(performed) > self._sent_effects:  # at most one new effect per call
            name, arg = performed[-1]
            _send(self._fd, ("effect", name, arg, key, result))
            self._sent_effects = len(performed)
        conflicts = self._conflicts
        while self._sent_conflicts < len(conflicts):
            _send(self._fd, ("conflict", conflicts[self._sent_conflicts]))
            self._sent_conflicts += 1

    def _crash(
        self, calls: int, *, before: bool, key: Hashable | None = None, result: Any = None
    ) -> NoReturn:
        self._flush(key, result)
        _send(self._fd, ("crash", calls, self._step))
        os._exit(CRASH_STATUS)


def _child(
    factory: Factory,
    inputs: Sequence[Any],
    run_id: str,
    log: ScenarioLog,
    crash: Point | None,
    fd: int,
    *,
    restart: bool,
    baseline: bool,
) -> NoReturn:
    status = 0
    try:
        ctx = _ForkedContext(run_id, log, crash, fd)
        life = live(
            factory,
            inputs,
            ctx,
            restart=restart,
            baseline=baseline,
            on_start=lambda empty: _send(fd, ("start", empty)),
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


class ForkedRunner:
    """Every life in a forked child (``mode="process"``)."""

    mode = "process"

    def __init__(self) -> None:
        if not hasattr(os, "fork"):
            raise UsageError(
                "mode='process' needs os.fork, which this platform lacks; use mode='inprocess'"
            )

    def life(
        self,
        factory: Factory,
        inputs: Sequence[Any],
        run_id: str,
        log: ScenarioLog,
        crash: Point | None,
        *,
        restart: bool,
        baseline: bool,
    ) -> Life:
        for stream in (sys.stdout, sys.stderr):
            stream.flush()  # or the child would print the parent's buffered output again
        read_fd, write_fd = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(read_fd)
            _child(
                factory, inputs, run_id, log, crash, write_fd, restart=restart, baseline=baseline
            )
        os.close(write_fd)
        chunks = []
        try:
            while chunk := os.read(read_fd, _READ_SIZE):
                chunks.append(chunk)
        finally:
            os.close(read_fd)
            _, status = os.waitpid(pid, 0)
        return self._merge(_records(b"".join(chunks)), log, status)

    @staticmethod
    def _merge(records: list[tuple[Any, ...]], log: ScenarioLog, status: int) -> Life:
        """Apply the child's records to the parent's log and rebuild its ``Life``."""
        ended: Life | None = None
        crashed: tuple[int, int] | None = None
        start_empty: bool | None = None
        died: str | None = None
        for record in records:
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
        if died is None:
            died = f"the child process {_describe_status(status)} before it finished its inputs"
        return Life(error=died, start_empty=start_empty)
