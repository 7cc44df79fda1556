"""Whether an owner is dead, where the suite's world never asks it (the ``api`` check's
third part): every worker the suite starts is the claimer's own user's, on a host with
``/proc``, and never under a debugger.

- an owner the claimer may not signal (another user's process: ``kill(pid, 0)`` says
  EPERM) is alive: only a pid that is gone proves a death;
- an owner stopped by a debugger (``ptrace``: state ``t``, tracing stop) is alive: only a
  zombie (``Z``) is dead among the processes that still answer;
- where ``/proc`` cannot be read (a container that hides it), a live owner is alive: a
  zombie goes unseen there until it is reaped, which is safe; the opposite is a stolen
  live lease.

Each asks :func:`agent_runtime.loop.lease.owner_is_dead` in a forked child (the one that
drops to the ``nobody`` user, or hides ``/proc`` in a mount namespace of its own), which
says the answer by its exit status; nothing outside the child changes.
"""

from __future__ import annotations

import ctypes
import os
import signal
import time
from collections.abc import Callable
from typing import Final

from agent_runtime.hostid import host_identity
from agent_runtime.loop import lease

NOBODY: Final = 65534  # the unprivileged uid and gid every Linux has
ALIVE, DEAD, RAISED = 0, 1, 2  # a child's exit status: owner_is_dead's answer
PTRACE_ATTACH: Final = 16
PTRACE_DETACH: Final = 17
CLONE_NEWNS: Final = 0x20000
MS_REC: Final = 0x4000
MS_PRIVATE: Final = 0x40000
_libc = ctypes.CDLL(None, use_errno=True)


def check_owners() -> list[str]:
    """What of the list above does not hold."""
    problems: list[str] = []
    said = _asked(_token(os.getpid()), _as_nobody)
    if said != ALIVE:
        problems.append(f"a live owner another user runs was called {_word(said)}")
    with _traced() as pid:
        said = _asked(_token(pid), None)
        if said != ALIVE:
            problems.append(f"a live owner stopped by a debugger was called {_word(said)}")
    said = _asked(_token(os.getpid()), _without_proc)
    if said != ALIVE:
        problems.append(f"a live owner was called {_word(said)} where /proc is hidden")
    return problems


def _token(pid: int) -> str:
    return f"{host_identity()}:{pid}:corner00"


def _word(said: int) -> str:
    return {DEAD: "dead", RAISED: "neither (owner_is_dead raised)"}.get(said, f"exit {said}")


def _asked(owner: str, prepare: Callable[[], None] | None) -> int:
    """``owner_is_dead(owner)`` in a forked child, after ``prepare``: its exit status."""
    host_identity()  # read before the fork (and before the child drops what it may read)
    child = os.fork()
    if child == 0:  # pragma: no cover - the child, which only exits
        try:
            if prepare is not None:
                prepare()
            os._exit(DEAD if lease.owner_is_dead(owner) else ALIVE)
        except BaseException:
            os._exit(RAISED)
    _, status = os.waitpid(child, 0)
    return os.waitstatus_to_exitcode(status)


def _as_nobody() -> None:
    if os.geteuid() == 0:  # an unprivileged claimer may signal nothing but its own
        os.setgid(NOBODY)
        os.setuid(NOBODY)


def _without_proc() -> None:
    """This child's own mount namespace, ``/proc`` an empty tmpfs in it."""
    for failed, what in (
        (_libc.unshare(CLONE_NEWNS), "unshare"),
        (_libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None), "a private /"),
        (_libc.mount(b"none", b"/proc", b"tmpfs", 0, None), "a tmpfs on /proc"),
    ):
        if failed != 0:
            raise OSError(ctypes.get_errno(), f"cannot hide /proc: {what}")


class _traced:
    """A sleeping child under ``ptrace`` (stopped, state ``t``), killed after."""

    def __enter__(self) -> int:
        self.pid = os.fork()
        if self.pid == 0:  # pragma: no cover - the child sleeps until it is killed
            while True:
                time.sleep(60)
        if _libc.ptrace(PTRACE_ATTACH, self.pid, None, None) != 0:
            raise OSError(ctypes.get_errno(), "cannot ptrace a child of this process")
        os.waitpid(self.pid, 0)  # attached: the child is in tracing stop now
        return self.pid

    def __exit__(self, *exc: object) -> None:
        _libc.ptrace(PTRACE_DETACH, self.pid, None, None)
        os.kill(self.pid, signal.SIGKILL)
        os.waitpid(self.pid, 0)
