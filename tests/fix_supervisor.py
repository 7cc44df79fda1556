"""A supervisor as a real process, with its log lines readable while it runs."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

WAIT = 60.0  # seconds any awaited condition may take before the test fails
TICK = 0.02  # seconds between polls of an awaited condition

RESUMING = re.compile(r"resuming run=(\S+) pid=(\d+)")
EXITED = re.compile(r"worker-exited run=(\S+) code=(-?\d+)")


def wait_for(what: str, check: Callable[[], Any], timeout: float = WAIT) -> Any:
    """Poll ``check`` until it returns something truthy; fail the test after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(TICK)


class SupervisorProcess:
    def __init__(self, env: dict[str, str], *args: str, new_session: bool = False) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "agent_runtime.supervisor", *args],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=new_session,  # its own process group: a host to kill whole
        )
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    @property
    def text(self) -> str:
        return "\n".join(self.lines)

    def resumed(self, run_id: str | None = None) -> list[tuple[str, int]]:
        found = [(m[1], int(m[2])) for m in map(RESUMING.search, list(self.lines)) if m]
        return [f for f in found if run_id is None or f[0] == run_id]

    def exits(self, run_id: str | None = None) -> list[tuple[str, int]]:
        found = [(m[1], int(m[2])) for m in map(EXITED.search, list(self.lines)) if m]
        return [f for f in found if run_id is None or f[0] == run_id]

    def stop(self, sig: int = signal.SIGTERM) -> int:
        if sig and self.proc.poll() is None:
            self.proc.send_signal(sig)
        code = self.proc.wait(timeout=WAIT)
        self._reader.join(timeout=1)  # orphaned workers may still hold the pipe open
        self.close()
        return code

    def close(self) -> None:
        if not self._reader.is_alive() and self.proc.stdout is not None:
            self.proc.stdout.close()

    def wait(self, timeout: float = WAIT) -> int:
        return self.stop(sig=0) if self.proc.poll() is not None else self._wait(timeout)

    def _wait(self, timeout: float) -> int:
        self.proc.wait(timeout=timeout)
        return self.stop(sig=0)


@pytest.fixture
def supervisors(agent: Any) -> Iterator[Callable[..., SupervisorProcess]]:
    """Start supervisors against the test's database and mocks; all stopped afterwards."""
    started: list[SupervisorProcess] = []

    def start(*args: str, new_session: bool = False, **env: str) -> SupervisorProcess:
        full = {k: v for k, v in os.environ.items() if k not in ("CRASH_AT", "CRASH_SEQ")}
        full.update(
            DATABASE_URL=agent.database_url,
            CLOUD_URL=agent.cloud_url,
            MODEL_URL=agent.model_url,
        )
        full.update(env)  # a test may point a remote elsewhere, e.g. through a proxy
        sup = SupervisorProcess(full, *args, new_session=new_session)
        started.append(sup)
        return sup

    yield start
    for sup in started:
        if sup.proc.poll() is None:
            sup.stop(signal.SIGKILL)
        for _, pid in sup.resumed():  # orphaned workers of a killed supervisor
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        sup._reader.join(timeout=5)
        sup.close()
