"""The server process seen from outside: is it alive, who is left behind, which port is free.

These are the operating-system facts :class:`agent_runtime.localpg.pgcluster.LocalCluster` decides
with. None of them talks to PostgreSQL itself:

- ``alive(pid)``: a process that exists and is not a zombie (servers this process started are
  polled, so that a stopped one does not linger unreaped);
- ``pids_with_cwd(dir)``: the processes whose working directory is ``dir`` (a postmaster and
  every backend chdir to their data directory, so these are a killed server's orphans);
- ``port_free(port)`` / ``free_port()``: TCP ports on the loopback address;
- ``file_lock(path)``: an ``fcntl`` lock serialising starts and stops across processes.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import os
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

HOST = "127.0.0.1"  # the only address a local cluster listens on
POLL_INTERVAL = 0.002  # seconds between checks of a process, a port or a lock

# Servers this process started: polled so that they do not linger as zombies after a stop.
_CHILDREN: dict[int, subprocess.Popen[bytes]] = {}


@atexit.register
def _reap_children() -> None:
    """At exit, collect the status of every server of ours that stopped: a ``Popen`` left
    unpolled warns "subprocess ... is still running" when it is collected, even for a server
    that a ``pg_ctl stop`` or a crash already ended."""
    for child in list(_CHILDREN.values()):
        with contextlib.suppress(Exception):
            child.poll()


def adopt_child(proc: subprocess.Popen[bytes]) -> None:
    """Remember a server this process started, so :func:`alive` reaps it once it exits."""
    _CHILDREN[proc.pid] = proc


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (an unreaped zombie counts as dead)."""
    child = _CHILDREN.get(pid)
    if child is not None:
        if child.poll() is None:
            return True
        _CHILDREN.pop(pid, None)  # reaped
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # an unreaped child of a non-reaping init is a zombie: dead for our purposes
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except (OSError, IndexError):
        return Path(f"/proc/{pid}").exists() or not Path("/proc/self").exists()
    return state not in ("Z", "X")


def cwd_of(pid: int) -> Path | None:
    """The working directory of ``pid``, or None where /proc does not tell."""
    try:
        return Path(os.readlink(f"/proc/{pid}/cwd"))
    except OSError:
        return None


def pids_with_cwd(target: Path) -> list[int]:
    """Every process but this one whose working directory is ``target``."""
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    own = os.getpid()
    return [
        int(entry)
        for entry in entries
        if entry.isdigit() and int(entry) != own and cwd_of(int(entry)) == target
    ]


def wait_orphans(
    target: Path, *, timeout: float, on_kill: Callable[[list[int]], None] | None = None
) -> None:
    """Wait for the processes working in ``target`` to exit; SIGKILL them after ``timeout``.

    Backends of a killed postmaster hold its shared memory, so a new server cannot start on
    the same data directory before they are gone. Returns once none is left, or after a
    second ``timeout`` past the kill (the start then reports what is still in the way).
    """
    deadline = time.monotonic() + timeout
    killed = False
    while pids := pids_with_cwd(target):
        if time.monotonic() > deadline:
            if killed:
                return
            if on_kill is not None:
                on_kill(pids)
            for pid in pids:
                with contextlib.suppress(OSError):
                    os.kill(pid, 9)
            killed, deadline = True, time.monotonic() + timeout
        time.sleep(POLL_INTERVAL)


def port_free(port: int) -> bool:
    """Whether the server could bind ``port`` on the loopback address now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the server does
        try:
            probe.bind((HOST, port))
        except OSError:
            return False
    return True


def free_port() -> int:
    """A port nothing listens on right now (the kernel's choice)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((HOST, 0))
        port: int = probe.getsockname()[1]
    return port


class LockTimeout(Exception):
    """Another process held the lock for longer than the caller would wait."""


@contextlib.contextmanager
def file_lock(path: Path, *, timeout: float) -> Iterator[None]:
    """Hold an exclusive ``fcntl`` lock on ``path`` (created if missing) for the block."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise LockTimeout(str(path)) from None
                time.sleep(POLL_INTERVAL * 2)
        yield
    finally:
        os.close(fd)
