"""The gates of the real pool's workers: how a schedule steers a long-lived pool worker.

The supervisor (:class:`agent_runtime.supervisor.Supervisor`, ``spawn="pool"``) forks its
workers itself and hands them runs over its own pipe; the suite does not touch that pipe.
What the suite gives it is the worker's crash plan: :class:`GateHook`, a
:class:`~properties.pilots.GatePlan` hook every forked worker inherits in its settings. At
every crash point the worker connects (once per process) to the runner's unix socket
(:class:`GateServer`) and reports the gate with the run it drives, that run's agent, its
generation, its owner token and its database backend; then it waits for one word: ``go``,
``crash`` (``os._exit(1)``, the CLI's crash) or ``beat`` (renew the lease once through the
worker's own heartbeat, then wait again). The heartbeat's thread is stopped at the run's
first gate, so a lease is renewed only when the schedule says, as in the other runners.

:class:`ChildSetup` is the supervisor's ``worker_transports`` factory, the one hook the
pool runs in each forked worker before it opens its ``Worker``: it sends the worker's
stderr to the runner's log file and takes the jitter out of the worker's backoffs (so a
schedule replays the same), and returns no transport: the worker reaches the mocks over
HTTP like a production worker. It also closes what the worker inherited from the runner's
process that a worker of a supervisor process of its own would never have had.
"""

from __future__ import annotations

import contextlib
import faulthandler
import json
import os
import random
import select
import signal
import socket
import sys
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from types import FrameType
from typing import Any, Final

import httpx

from agent_runtime.crash import exit_process
from agent_runtime.loop.lease import Heartbeat
from agent_runtime.loop.worker import Worker

from .pilots import beat

HELLO_TIMEOUT: Final = 10.0  # seconds a connecting worker may take to say who it is


class LineChannel:
    """JSON lines over a connected unix socket."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self._buffer = b""
        self.closed = False

    def fileno(self) -> int:
        return self.sock.fileno()

    def send(self, obj: object) -> None:
        self.sock.sendall((json.dumps(obj) + "\n").encode())

    @property
    def buffered(self) -> bool:
        return b"\n" in self._buffer

    def receive(self, timeout: float | None) -> dict[str, Any] | None:
        """The next object; None at end of file (the other side is gone)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while b"\n" not in self._buffer:
            left = None if deadline is None else max(deadline - time.monotonic(), 0.0)
            ready, _, _ = select.select([self.sock], [], [], left)
            if not ready:
                raise TimeoutError(f"no message in {timeout}s")
            try:
                chunk = self.sock.recv(65536)
            except ConnectionResetError:
                chunk = b""
            if not chunk:
                return None
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        obj: dict[str, Any] = json.loads(line)
        return obj

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            with contextlib.suppress(OSError):
                self.sock.close()


# -- inside a pool worker -----------------------------------------------------------------


def _held_run() -> dict[str, Any]:
    """The locals of the ``Worker.run`` this gate was reached in: the worker, the lease it
    holds, the agent it drives the run with."""
    code = Worker.run.__code__
    frame: FrameType | None = sys._getframe(2)
    while frame is not None and frame.f_code is not code:
        frame = frame.f_back
    if frame is None:
        raise RuntimeError("a gate was reached outside Worker.run")
    return frame.f_locals


class GateHook:
    """The crash plan's hook in every pool worker: report the gate, wait for the word."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._pid = -1
        self._channel: LineChannel | None = None
        self._quiet: Heartbeat | None = None  # the heartbeat whose thread was stopped

    def _connect(self) -> LineChannel:
        if self._channel is None or self._pid != os.getpid():
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.connect(self.path)
            self._channel = LineChannel(sock)
            self._pid = os.getpid()
            self._channel.send({"hello": self._pid})
        return self._channel

    def __call__(self, point: str, seq: int) -> None:
        held = _held_run()
        worker: Worker = held["self"]
        heartbeat = worker.heartbeat
        if heartbeat is not None and heartbeat is not self._quiet:
            heartbeat.stop()  # from here on the runner says when it beats
            self._quiet = heartbeat
        channel = self._connect()
        lease = held["lease"]
        channel.send(
            {
                "gate": [point, seq],
                "run": lease.run_id,
                "generation": lease.generation,
                "agent": held["owned"].name,
                "owner": worker.owner,
                "backend_pid": worker.journal.conn.info.backend_pid,
            }
        )
        while True:
            answer = channel.receive(None)
            if answer is not None and answer.get("action") == "beat":
                channel.send({"beat": beat(worker).to_json()})
                continue
            if answer is None or answer.get("action") != "go":
                exit_process(point, seq)  # the CLI's crash: os._exit(1), nothing flushed
            return


def _no_jitter() -> float:
    return 0.0


class ChildSetup:
    """The supervisor's ``worker_transports``: run in each forked worker before it opens.

    ``foreign``: the descriptors the worker must not keep that its own supervisor does not
    know of (it closes its own ones): the other supervisor's pipes, wake-up pipe and
    connection, and the runner's gate sockets. In production two supervisors are two
    processes; here they share one, and a worker of one holding the other's end of a pipe
    would keep that pipe from ever hanging up."""

    def __init__(self, log_path: Path, foreign: Callable[[], Iterable[int]]) -> None:
        self.log_path = log_path
        self.foreign = foreign

    def __call__(self) -> Mapping[str, httpx.BaseTransport]:
        for fd in set(self.foreign()):
            with contextlib.suppress(OSError):
                os.close(fd)
        log_fd = os.open(self.log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.dup2(log_fd, 2)
        os.close(log_fd)
        # a worker the runner finds silent is asked for its threads' stacks (silence.py)
        faulthandler.register(signal.SIGUSR1, file=2, all_threads=True)
        signal.signal(signal.SIGALRM, signal.SIG_DFL)
        # every backoff its full length, as the suite's other workers have it (rand=0)
        random.random = _no_jitter
        return {}


# -- in the runner --------------------------------------------------------------------------


class GateServer:
    """The runner's end: a unix socket every pool worker connects to at its first gate."""

    def __init__(self, directory: Path) -> None:
        self.path = str(directory / "gates.sock")
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(self.path)
        self.listener.listen(64)
        self.listener.setblocking(False)
        self.channels: dict[int, LineChannel] = {}  # by the worker's pid

    def accept(self) -> None:
        """Take every waiting connection and learn whose it is."""
        while True:
            try:
                sock, _ = self.listener.accept()
            except BlockingIOError:
                return
            sock.setblocking(True)
            channel = LineChannel(sock)
            hello = channel.receive(HELLO_TIMEOUT)
            if hello is None or "hello" not in hello:
                channel.close()
                continue
            old = self.channels.pop(int(hello["hello"]), None)
            if old is not None:
                old.close()
            self.channels[int(hello["hello"])] = channel

    def forget(self, pid: int) -> None:
        channel = self.channels.pop(pid, None)
        if channel is not None:
            channel.close()

    def clear(self) -> None:
        for pid in list(self.channels):
            self.forget(pid)

    def close(self) -> None:
        self.clear()
        self.listener.close()
        with contextlib.suppress(OSError):
            os.unlink(self.path)
