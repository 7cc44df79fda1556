"""The process an in-process worker's owner token names (:class:`Body`), for
:mod:`properties.thread_pilot`."""

from __future__ import annotations

import atexit
import contextlib
import functools
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

# The stand-ins alive now: a process that exits while one of its workers was never ended
# (stopped by a signal while it made one, say) kills them on its way out, or they would
# sleep on after it, for ever. (A forked child that exits normally runs this too, and
# kills nothing: Popen.kill of a process that is not its child finds it gone, ECHILD.)
_LIVE: set[subprocess.Popen[bytes]] = set()


@atexit.register
def _end_all() -> None:
    for proc in list(_LIVE):
        with contextlib.suppress(OSError):
            proc.kill()
            proc.wait()
    _LIVE.clear()


class Body:
    """The process an in-process worker's owner token names. Its workers are threads of one
    process, whose pid proves nothing (``owner_is_dead`` never calls its own process dead),
    so each gets a stand-in (``sleep``) that lives while the worker does and is killed when
    it ends: reaped (its pid gone), or left a zombie until cleanup when the schedule killed
    the worker (a ``crash`` with ``kill``) -- the two deaths the runtime's probe must see.
    Its name holds a parenthesis, as a process renamed by its service or started through a
    link may (``/proc/<pid>/stat`` then shows ``(stand-in (w))``): a probe that read
    the state after the first ``)`` rather than the last called a zombie alive (lease
    ``_is_zombie``'s ``rsplit(")", 2)``, 9c514b25)."""

    def __init__(self, *, own: bool = False) -> None:
        """``own``: the worker is a thread of this very process, which names it (a sibling
        of its claimer, ``pilots.SIBLING_RUN``): no stand-in, and never gone."""
        self._proc: subprocess.Popen[bytes] | None = None
        self.pid = os.getpid()
        self.gone = False
        if own:
            return
        self._proc = subprocess.Popen(
            [str(_stand_in()), "infinity"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        _LIVE.add(self._proc)
        self.pid = self._proc.pid
        self.gone = False

    def end(self, *, reap: bool) -> None:
        if self._proc is None:  # this process: it lives on
            return
        if not self.gone:
            _LIVE.discard(self._proc)
            with contextlib.suppress(OSError):
                self._proc.kill()
            if not reap:  # dead before anyone asks: a zombie now, not a moment later
                with contextlib.suppress(ChildProcessError):
                    os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOWAIT)
            self.gone = True
        if reap:
            self._proc.wait()


@functools.cache
def _stand_in() -> Path:
    """``sleep`` under a name with parentheses: a link, whose name the kernel takes as the
    process's own (its ``comm``), in a folder of this process's removed at its exit."""
    folder = Path(tempfile.mkdtemp(prefix="properties-stand-in-"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    link = folder / "stand-in (w)"  # a name is cut at 15 characters
    link.symlink_to(shutil.which("sleep") or "/bin/sleep")
    return link
