"""Workers the schedule runner drives gate by gate: a thread, or a real process.

Every crash point of the runtime is a *gate*: the worker reports ``(point, seq)``
and waits for one word back -- ``go`` (carry on) or ``crash`` (die right here).
While a worker waits at a gate nothing else of it runs, so the runner decides
every interleaving and a schedule replays the same way every time.

- :class:`ThreadPilot` runs ``Worker.run`` in a thread against in-process mocks;
  ``crash`` raises :class:`~agent_runtime.crash.SimulatedCrash` (a
  ``BaseException``, as in the runtime's own in-process tests).
- :class:`ProcessPilot` runs it in a forked child (or a fresh interpreter,
  ``spawn="exec"``) against the mocks over HTTP; ``crash`` is the CLI's own
  ``exit_process`` (``os._exit(1)``), ``kill`` is ``SIGKILL`` from outside, and a
  stall is ``SIGSTOP`` / ``SIGCONT``.

The protocol between the two sides is one JSON object per line.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import queue
import select
import signal
import socket
import subprocess
import sys
import threading
import time
import warnings
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal

import httpx

from agent_runtime import db
from agent_runtime.config import Settings
from agent_runtime.crash import CrashPlan, SimulatedCrash, exit_process
from agent_runtime.records import Lease
from agent_runtime.worker import Worker

from . import variants

Action = Literal["go", "crash", "kill"]
MESSAGE_TIMEOUT: Final = 60.0  # seconds a worker may take to reach its next gate
CRASHED: Final = "crashed"  # exit kind of a worker we killed at a gate
DONE: Final = "done"  # exit kind of a worker whose run() returned
ABANDON_WAIT: Final = 10.0  # seconds cleanup waits for an in-process worker to stop

log = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True)
class GatePlan(CrashPlan):
    """A crash plan that hands every point to ``hook`` instead of matching one."""

    hook: Callable[[str, int], None]

    def reached(self, point: str, seq: int) -> None:
        self.hook(point, seq)


@dataclass(frozen=True, kw_only=True)
class Gate:
    point: str
    seq: int


@dataclass(frozen=True, kw_only=True)
class Exit:
    kind: str  # DONE, CRASHED, or the exception's class name
    detail: str = ""


Message = Gate | Exit


@dataclass(frozen=True, kw_only=True)
class Start:
    """How a pilot's worker enters its run (the three ways the runtime has)."""

    run_id: str
    label: str  # w1, w2, ... in the order the schedule started them
    takeover: bool = False  # restart: take a live lease over (the caller says it is dead)
    lease: Lease | None = None  # supervisor: a lease claimed for this worker

    def to_json(self) -> dict[str, Any]:
        lease = self.lease
        return {
            "run_id": self.run_id,
            "label": self.label,
            "takeover": self.takeover,
            "lease": None
            if lease is None
            else {"run_id": lease.run_id, "owner": lease.owner, "generation": lease.generation},
        }

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> Start:
        lease = obj.get("lease")
        return cls(
            run_id=obj["run_id"],
            label=obj["label"],
            takeover=bool(obj["takeover"]),
            lease=None if lease is None else Lease(**lease),
        )


def owner_of(label: str, pid: int | None = None) -> str:
    """``host:pid:label``: the runtime's owner-token shape, with a readable nonce."""
    return f"{socket.gethostname()}:{pid or os.getpid()}:{label}"


def build_worker(
    variant: variants.Variant,
    conn: db.Connection,
    settings: Settings,
    *,
    owner: str,
    hook: Callable[[str, int], None],
    model_transport: httpx.BaseTransport | None = None,
    cloud_transport: httpx.BaseTransport | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> Worker:
    return variant.worker.build(
        variant.journal(conn),
        settings,
        model_transport=model_transport,
        cloud_transport=cloud_transport,
        sleep=sleep,
        crash=GatePlan(hook=hook),
        heartbeat_url=None,  # heartbeats are the runner's to model: it renews live leases
        owner=owner,
    )


def enter(worker: Worker, start: Start) -> None:
    worker.run(start.run_id, lease=start.lease, create=start.lease is None, takeover=start.takeover)


class Pilot(ABC):
    """One worker, paused at a gate whenever the runner is not letting it go."""

    start: Start
    owner: str
    backend_pid: int | None

    @abstractmethod
    def next(self, timeout: float = MESSAGE_TIMEOUT) -> Message:
        """Block until the worker reaches a gate or ends."""

    @abstractmethod
    def reply(self, action: Action) -> None:
        """Answer the gate the worker waits at."""

    def freeze(self) -> None:  # noqa: B027 -- a no-op unless the worker is a process
        """Stop the worker's whole process (a stall); no-op where that means nothing."""

    def thaw(self) -> None:  # noqa: B027
        """Undo :meth:`freeze`."""

    @abstractmethod
    def abandon(self) -> None:
        """Make sure the worker is gone (cleanup); safe to call twice."""


# -- in-process ----------------------------------------------------------------------------


class ConnectionPool:
    """Connections of ended in-process workers, handed to the next worker.

    A worker only ever ends between two autocommit statements (at a gate, or after
    its last write), so a healthy connection it leaves behind carries no state a
    fresh one would not; reusing it saves a connect (about 4 ms) per worker. A
    connection the schedule terminated, or one that broke, is closed instead.
    """

    def __init__(self, url: str) -> None:
        self.url = url
        self._spare: list[db.Connection] = []
        self._lock = threading.Lock()

    def take(self, label: str) -> db.Connection:
        with self._lock:
            if self._spare:
                return self._spare.pop()
        return db.connect(self.url, application_name="properties.worker")

    def give_back(self, conn: db.Connection, *, healthy: bool) -> None:
        if healthy and not conn.closed and not conn.broken:
            with self._lock:
                self._spare.append(conn)
                return
        with contextlib.suppress(Exception):
            conn.close()

    def close(self) -> None:
        with self._lock:
            spare, self._spare = self._spare, []
        for conn in spare:
            with contextlib.suppress(Exception):
                conn.close()


class ThreadPilot(Pilot):
    """``Worker.run`` in a daemon thread, over a database connection of its own."""

    def __init__(
        self,
        start: Start,
        *,
        pool: ConnectionPool,
        settings: Settings,
        variant: variants.Variant,
        model_transport: httpx.BaseTransport,
        cloud_transport: httpx.BaseTransport,
    ) -> None:
        self.start = start
        self.owner = start.lease.owner if start.lease else owner_of(start.label)
        self._inbox: queue.Queue[Message] = queue.Queue()
        self._outbox: queue.Queue[Action] = queue.Queue()
        self._pool = pool
        self._conn = pool.take(start.label)
        self.backend_pid = self._conn.info.backend_pid
        self.dropped = False  # set by the runner when it terminates this backend
        self._worker = build_worker(
            variant,
            self._conn,
            settings,
            owner=self.owner,
            hook=self._gate,
            model_transport=model_transport,
            cloud_transport=cloud_transport,
            sleep=lambda seconds: None,
        )
        self._ended = False
        self._thread = threading.Thread(
            target=self._body, name=f"properties-{start.label}", daemon=True
        )
        self._thread.start()

    def _gate(self, point: str, seq: int) -> None:
        self._inbox.put(Gate(point=point, seq=seq))
        if self._outbox.get() != "go":
            raise SimulatedCrash(point, seq)

    def _body(self) -> None:
        message: Message = Exit(kind=DONE)
        try:
            enter(self._worker, self.start)
        except SimulatedCrash:
            message = Exit(kind=CRASHED)
        except BaseException as exc:  # everything else is evidence: report it
            message = Exit(kind=type(exc).__name__, detail=str(exc)[:500])
        finally:
            with contextlib.suppress(Exception):
                self._worker.model.close()
                self._worker.cloud.close()
            self._pool.give_back(self._conn, healthy=not self.dropped)
            self._inbox.put(message)

    def next(self, timeout: float = MESSAGE_TIMEOUT) -> Message:
        try:
            message = self._inbox.get(timeout=timeout)
        except queue.Empty:
            raise TimeoutError(
                f"worker {self.start.label} on {self.start.run_id} reached no gate in {timeout}s"
            ) from None
        if isinstance(message, Exit):
            self._ended = True
            self._thread.join(timeout=timeout)
        return message

    def reply(self, action: Action) -> None:
        self._outbox.put("go" if action == "go" else "crash")

    def abandon(self) -> None:
        if self._ended:
            return
        deadline = time.monotonic() + ABANDON_WAIT
        while self._thread.is_alive() and time.monotonic() < deadline:
            self._outbox.put("crash")  # answers the gate it waits at, if it waits at one
            self._thread.join(timeout=0.05)
        if self._thread.is_alive():  # stuck outside a gate: a daemon thread, left behind
            log.warning("worker %s did not stop within %ss", self.start.label, ABANDON_WAIT)
        self._ended = True


# -- real processes ------------------------------------------------------------------------


class _Channel:
    """JSON lines over a pair of pipe file descriptors."""

    def __init__(self, rfd: int, wfd: int) -> None:
        self.rfd = rfd
        self.wfd = wfd
        self._buffer = b""

    def send(self, obj: object) -> None:
        data = (json.dumps(obj) + "\n").encode()
        while data:
            data = data[os.write(self.wfd, data) :]

    def receive(self, timeout: float | None) -> dict[str, Any] | None:
        """The next object, or None at end of file (the other side is gone)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while b"\n" not in self._buffer:
            left = None if deadline is None else max(deadline - time.monotonic(), 0.0)
            ready, _, _ = select.select([self.rfd], [], [], left)
            if not ready:
                raise TimeoutError(f"no message in {timeout}s")
            chunk = os.read(self.rfd, 65536)
            if not chunk:
                return None
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        obj: dict[str, Any] = json.loads(line)
        return obj

    def close(self) -> None:
        for fd in (self.rfd, self.wfd):
            with contextlib.suppress(OSError):
                os.close(fd)


def child_main(config: dict[str, Any], channel: _Channel) -> int:
    """The worker process: build the worker, say hello, run, report how it ended."""
    start = Start.from_json(config["start"])
    settings = Settings(**config["settings"])
    owner = start.lease.owner if start.lease else owner_of(start.label, os.getpid())

    def hook(point: str, seq: int) -> None:
        channel.send({"gate": [point, seq]})
        answer = channel.receive(None)
        if answer is None or answer.get("action") != "go":
            exit_process(point, seq)  # the CLI's crash: os._exit(1), nothing flushed

    try:
        conn = db.connect(config["url"], application_name=f"properties.{start.label}")
        worker = build_worker(
            variants.get(config["variant"]), conn, settings, owner=owner, hook=hook
        )
        channel.send({"hello": {"owner": owner, "backend_pid": conn.info.backend_pid}})
        enter(worker, start)
    except BaseException as exc:
        channel.send({"exit": type(exc).__name__, "detail": str(exc)[:500]})
        return int(getattr(exc, "exit_code", 70))
    channel.send({"exit": DONE})
    return 0


def _settings_json(settings: Settings) -> dict[str, Any]:
    fields = (
        "database_url", "cloud_url", "model_url", "lease", "heartbeat", "poll",
        "model_timeout", "tool_timeout", "tool_retries", "retry_backoff", "max_attempts",
    )  # fmt: skip
    return {name: getattr(settings, name) for name in fields}


class ProcessPilot(Pilot):
    """A worker in its own process: forked from the runner, or a fresh interpreter."""

    def __init__(
        self,
        start: Start,
        *,
        url: str,
        settings: Settings,
        variant: variants.Variant,
        spawn: Literal["fork", "exec"],
        log_path: Path,
    ) -> None:
        self.start = start
        config = {
            "start": start.to_json(),
            "url": url,
            "settings": _settings_json(settings),
            "variant": variant.name,
        }
        to_child_r, to_child_w = os.pipe()
        from_child_r, from_child_w = os.pipe()
        self._popen: subprocess.Popen[bytes] | None = None
        if spawn == "fork":
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", DeprecationWarning)  # fork with threads (3.12+)
                pid = os.fork()
            if pid == 0:  # the child never returns into the runner
                code = 70
                try:
                    os.close(to_child_w)
                    os.close(from_child_r)
                    log_fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
                    os.dup2(log_fd, 2)
                    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGALRM, signal.SIGCHLD):
                        signal.signal(sig, signal.SIG_DFL)
                    code = child_main(config, _Channel(to_child_r, from_child_w))
                finally:
                    os._exit(code)
            self.pid = pid
        else:
            with log_path.open("ab") as log:
                self._popen = subprocess.Popen(
                    [sys.executable, "-m", "properties._child", json.dumps(config),
                     str(to_child_r), str(from_child_w)],
                    pass_fds=(to_child_r, from_child_w),
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=log,
                    cwd=Path(__file__).resolve().parent.parent,
                )  # fmt: skip
            self.pid = self._popen.pid
        os.close(to_child_r)
        os.close(from_child_w)
        self._channel = _Channel(from_child_r, to_child_w)
        self._ended = False
        self._frozen = False
        self._pending: Message | None = None  # how it ended, if it ended before saying hello
        self.owner = ""
        self.backend_pid = None
        hello = self._channel.receive(MESSAGE_TIMEOUT)
        if hello is not None and "hello" in hello:
            self.owner = hello["hello"]["owner"]
            self.backend_pid = hello["hello"]["backend_pid"]
        else:
            self._pending = self._exit_of(hello)

    def _wait(self) -> int:
        if self._popen is not None:
            return self._popen.wait()
        _, status = os.waitpid(self.pid, 0)
        return os.waitstatus_to_exitcode(status)

    def _exit_of(self, message: dict[str, Any] | None) -> Exit:
        code = self._wait()
        self._ended = True
        self._channel.close()
        if message is not None and "exit" in message:
            return Exit(kind=message["exit"], detail=message.get("detail", ""))
        if code in (1, -signal.SIGKILL):
            return Exit(kind=CRASHED, detail=f"exit code {code}")
        return Exit(kind="ProcessDied", detail=f"exit code {code} without a word")

    def next(self, timeout: float = MESSAGE_TIMEOUT) -> Message:
        if self._pending is not None:
            message, self._pending = self._pending, None
            return message
        obj = self._channel.receive(timeout)
        if obj is not None and "gate" in obj:
            point, seq = obj["gate"]
            return Gate(point=point, seq=seq)
        return self._exit_of(obj)

    def reply(self, action: Action) -> None:
        if action == "kill":
            os.kill(self.pid, signal.SIGKILL)
        else:
            self._channel.send({"action": action})

    def freeze(self) -> None:
        if not self._ended and not self._frozen:
            os.kill(self.pid, signal.SIGSTOP)
            self._frozen = True

    def thaw(self) -> None:
        if not self._ended and self._frozen:
            os.kill(self.pid, signal.SIGCONT)
            self._frozen = False

    def abandon(self) -> None:
        if self._ended:
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGKILL)
        self._wait()
        self._ended = True
        self._channel.close()
