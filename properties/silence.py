"""What a silent worker was doing: the words a runner's ``TimeoutError`` carries.

A worker that says nothing for ``MESSAGE_TIMEOUT`` is either starved (a busy machine) or
stuck (a lock it will never get, a database wait). The difference is in the kernel's view
of the process and in the database's view of its sessions, read here at the moment the
runner gives up, so a rare silence seen once in CI explains itself.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path

from agent_runtime.store import db

from . import sqlfile


def _proc(pid: int, name: str) -> str:
    with contextlib.suppress(OSError):
        return Path(f"/proc/{pid}/{name}").read_text(errors="replace").strip()
    return "?"


def _process(pid: int) -> str:
    """State, kernel wait channel and threads of ``pid``, from /proc."""
    status = dict(line.split(":", 1) for line in _proc(pid, "status").splitlines() if ":" in line)
    state = status.get("State", "?").strip()
    threads = status.get("Threads", "?").strip()
    return f"state={state!r} wchan={_proc(pid, 'wchan')!r} threads={threads}"


def _sessions(url: str) -> str:
    """The database's sessions that are not idle: who waits on what."""
    try:
        with db.connect(url, application_name="properties.silence") as conn:
            rows = sqlfile.rows(conn, "busy_sessions")
    except Exception as exc:  # the diagnosis must never hide the timeout itself
        return f"sessions: unreadable ({type(exc).__name__}: {exc})"
    said = [
        f"{r['application_name']}[{r['pid']}] {r['state']} {r['wait_event_type']}:"
        f"{r['wait_event']} {r['query'][:80]!r}"
        for r in rows
    ]
    return "sessions: " + ("; ".join(said) if said else "none busy")


def _catches(pid: int, signum: int) -> bool:
    """Whether ``pid`` has a handler for ``signum`` (its SigCgt mask in /proc)."""
    for line in _proc(pid, "status").splitlines():
        if line.startswith("SigCgt:"):
            return bool(int(line.split()[1], 16) >> (signum - 1) & 1)
    return False


def stacks(pid: int, log: Path) -> str:
    """The Python stacks of ``pid``'s threads, dumped by faulthandler into ``log`` (the
    pool workers' stderr, see pool_gate.ChildSetup) on SIGUSR1; "" if it has no handler."""
    if not _catches(pid, signal.SIGUSR1):
        return ""
    size = log.stat().st_size if log.exists() else 0
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGUSR1)
    for _ in range(50):  # its dump is written by a C handler at once, if it runs at all
        time.sleep(0.02)
        if log.exists() and log.stat().st_size > size:
            break
    with contextlib.suppress(OSError), log.open("rb") as f:
        f.seek(size)
        return "; stacks:\n" + f.read(20000).decode(errors="replace")
    return ""


def describe(pid: int, url: str, log: Path | None = None) -> str:
    """One paragraph on a worker that went silent (and its stacks, given its ``log``)."""
    if log is not None:
        return _describe(pid, url) + stacks(pid, log)
    return _describe(pid, url)


def _describe(pid: int, url: str) -> str:
    with contextlib.suppress(OSError):
        load = Path("/proc/loadavg").read_text().split()[:3]
        return f"{_process(pid)}; load={' '.join(load)}; {_sessions(url)}"
    return f"{_process(pid)}; {_sessions(url)}"
