"""Workers as real processes, driven gate by gate like the threads of :mod:`properties.pilots`.

A :class:`ProcessPilot` runs ``Worker.run`` in a forked child (or a fresh interpreter,
``spawn="exec"``: ``python -m properties._child``) against the mocks over HTTP. At a gate
the child reports ``(point, seq)`` and waits: ``go`` carries on, ``crash`` is the CLI's own
``exit_process`` (``os._exit(1)``), ``kill`` is ``SIGKILL`` from outside, ``beat`` renews the
lease through the worker's heartbeat and waits again; a stall is ``SIGSTOP`` / ``SIGCONT``.
The protocol between the two sides is one JSON object per line over two pipes.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import select
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path
from typing import Any, Literal

from agent_runtime.config import Settings
from agent_runtime.crash import exit_process
from agent_runtime.loop.worker import Worker
from agent_runtime.store import db

from . import variants
from .pilots import (
    CRASHED,
    DONE,
    MESSAGE_TIMEOUT,
    Action,
    Beat,
    Exit,
    Gate,
    Message,
    Pilot,
    Start,
    beat,
    build_worker,
    enter,
    owner_of,
)
from .violations import Violation
from .waits import WaitSeam


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
    # its own token, as a supervisor's worker has: started on a claimed lease, it adopts it
    owner = owner_of(start.label, os.getpid(), start.run_id)

    worker: Worker | None = None

    def hook(point: str, seq: int) -> None:
        channel.send({"gate": [point, seq]})
        while True:
            answer = channel.receive(None)
            if answer is not None and answer.get("action") == "beat" and worker is not None:
                channel.send({"beat": beat(worker).to_json()})
                continue
            if answer is None or answer.get("action") != "go":
                exit_process(point, seq)  # the CLI's crash: os._exit(1), nothing flushed
            return

    def heartbeat_connect() -> db.Connection:
        return db.connect(config["url"], application_name=f"properties.{start.label}.heartbeat")

    try:
        conn = db.connect(config["url"], application_name=f"properties.{start.label}")
        worker = build_worker(
            variants.get(config["variant"]),
            conn,
            settings,
            owner=owner,
            hook=hook,
            support_url=config["support_url"],
            sleep=WaitSeam(hook),  # never sleeps, as in-process: a gate at a retry wait
            heartbeat_connect=heartbeat_connect,
            start=start,
        )
        channel.send({"hello": {"owner": owner, "backend_pid": conn.info.backend_pid}})
        enter(worker, start, config["support_url"])
    except BaseException as exc:
        channel.send({"exit": type(exc).__name__, "detail": str(exc)[:500]})
        return int(getattr(exc, "exit_code", 70))
    channel.send({"exit": DONE})
    return 0


def _settings_json(settings: Settings) -> dict[str, Any]:
    """Every setting but the crash plan (the child's crash is its gate)."""
    return {
        f.name: getattr(settings, f.name) for f in dataclasses.fields(settings) if f.name != "crash"
    }


class ProcessPilot(Pilot):
    """A worker in its own process: forked from the runner, or a fresh interpreter."""

    def __init__(
        self,
        start: Start,
        *,
        url: str,
        settings: Settings,
        variant: variants.Variant,
        support_url: str,
        spawn: Literal["fork", "exec"],
        log_path: Path,
    ) -> None:
        self.start = start
        config = {
            "start": start.to_json(),
            "url": url,
            "support_url": support_url,
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
                    for sig in (
                        signal.SIGTERM,
                        signal.SIGINT,
                        signal.SIGALRM,
                        signal.SIGCHLD,
                        signal.SIGHUP,
                    ):  # as a service runs (not under nohup)
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

    @property
    def gone(self) -> bool:
        """Reaped: the pid its owner token names is gone (``claim_truth`` then holds a claim
        that fenced it out as if alive to account, as in-process)."""
        return self._ended

    def beat(self) -> Beat:
        try:
            self._channel.send({"action": "beat"})
        except BrokenPipeError:  # its process is gone: nobody here stopped it
            answer = None
        else:
            answer = self._channel.receive(MESSAGE_TIMEOUT)
        if answer is None or "beat" not in answer:
            raise Violation(
                "worker",
                self.start.run_id,
                None,
                f"{self.start.label} did not answer a beat while it waited at a gate (its "
                f"process gone, and nobody here stopped it: {answer!r})",
            )
        return Beat.from_json(answer["beat"])

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
