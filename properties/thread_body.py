"""The process an in-process worker's owner token names (:class:`Body`), for
:mod:`properties.thread_pilot`."""

from __future__ import annotations

import contextlib
import os
import subprocess


class Body:
    """The process an in-process worker's owner token names. Its workers are threads of one
    process, whose pid proves nothing (``owner_is_dead`` never calls its own process dead),
    so each gets a stand-in (``sleep``) that lives while the worker does and is killed when
    it ends: reaped (its pid gone), or left a zombie until cleanup when the schedule killed
    the worker (a ``crash`` with ``kill``) -- the two deaths the runtime's probe must see."""

    def __init__(self) -> None:
        self._proc = subprocess.Popen(
            ["sleep", "infinity"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        self.pid = self._proc.pid
        self.gone = False

    def end(self, *, reap: bool) -> None:
        if not self.gone:
            with contextlib.suppress(OSError):
                self._proc.kill()
            if not reap:  # dead before anyone asks: a zombie now, not a moment later
                with contextlib.suppress(ChildProcessError):
                    os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOWAIT)
            self.gone = True
        if reap:
            self._proc.wait()
