"""What a silent worker was doing: the words a runner's ``TimeoutError`` carries.

A worker that says nothing for ``MESSAGE_TIMEOUT`` is either starved (a busy machine) or
stuck (a lock it will never get, a database wait). The difference is in the kernel's view
of the process and in the database's view of its sessions, read here at the moment the
runner gives up, so a rare silence seen once in CI explains itself.
"""

from __future__ import annotations

import contextlib
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


def describe(pid: int, url: str) -> str:
    """One paragraph on a worker that went silent."""
    with contextlib.suppress(OSError):
        load = Path("/proc/loadavg").read_text().split()[:3]
        return f"{_process(pid)}; load={' '.join(load)}; {_sessions(url)}"
    return f"{_process(pid)}; {_sessions(url)}"
