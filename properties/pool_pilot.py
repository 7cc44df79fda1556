"""One run held by one of the real pool's workers, as the schedule runner drives it.

:class:`PoolPilot` is one *tenure*: a pool worker holding one run the supervisor handed
it, from the hand-out to the run's end. A long-lived worker has many tenures, one after
another, of runs of any kind. The tenure's gates come over the gate socket
(:mod:`properties.pool_gate`); its end comes the way the supervisor hears it: the code
the worker says over the supervisor's pipe, or the exit status of a worker that died
holding it (read by the supervisor's own ``reap``, never by the runner: the supervisor
waits for its children itself). An orphan (its supervisor died, ``hangup``) finishes the
run in hand and exits; the runner waits for it then.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import time
from typing import TYPE_CHECKING, Final

from agent_runtime.store.records import Lease
from agent_runtime.supervisor.workerpool import WorkerProcess

from .pilots import MESSAGE_TIMEOUT, Action, Beat, Exit, Message, Pilot, Start
from .silence import describe

if TYPE_CHECKING:
    from .pool_world import PoolWorld, Supervised

POLL: Final = 0.02  # seconds between two looks at a worker that is ending


class PoolPilot(Pilot):
    """One run held by one pool worker: from the hand-out to the run's end."""

    def __init__(
        self, start: Start, *, world: PoolWorld, supervised: Supervised, proc: WorkerProcess
    ) -> None:
        self.start = start
        self.world = world
        self.supervised = supervised
        self.proc = proc
        self.pid = proc.pid
        assert proc.lease is not None
        self.lease: Lease = proc.lease  # as the supervisor claimed it
        self.owner = ""  # the worker's own token: said at its first gate
        self.backend_pid: int | None = None
        self.exit: Exit | None = None
        self.orphan = False  # its supervisor died: nobody reaps it but the runner
        self.terminated = False  # the runner sent it SIGTERM
        self.frozen = False
        self.hung = False  # it was stalled: a supervisor may kill a hung worker (issue 21.2)
        self.ended = False
        self.reaped_code: int | None = None

    # -- the end of the tenure ------------------------------------------------------------

    def end(self, code: int) -> None:
        """The supervisor (or, for an orphan, the runner) heard how the run ended."""
        if self.exit is None:
            self.reaped_code = code
            self.exit = Exit(kind=self.world.kind_of(self, code), detail=f"code {code}")

    def _look(self) -> None:
        """Let the supervisor hear what its worker said or how it died."""
        if self.orphan:
            code = self.world.orphan_exit(self.pid)
            if code is not None:
                self.end(code)
        else:
            self.world.reap(self.supervised)

    def next(self, timeout: float = MESSAGE_TIMEOUT) -> Message:
        deadline = time.monotonic() + timeout
        gates = self.world.gates
        while True:
            if self.exit is not None:
                self._close()
                return self.exit
            channel = gates.channels.get(self.pid)
            if channel is not None and channel.buffered:
                message = channel.receive(0)
                if message is not None:
                    return self.world.gate_of(self, message)
            fds: list[int] = [gates.listener.fileno()]
            if channel is not None:
                fds.append(channel.fileno())
            pipe = None if self.orphan else self.proc.fileno()
            if pipe is not None:
                fds.append(pipe)
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(
                    f"pool worker {self.start.label} ({self.pid}) silent {timeout}s: "
                    + describe(self.pid, self.world.url, self.world.setup.log_path)
                )
            ready, _, _ = select.select(fds, [], [], min(left, POLL if pipe is None else 1.0))
            if gates.listener.fileno() in ready:
                gates.accept()
            if channel is not None and channel.fileno() in ready:
                message = channel.receive(0)
                if message is not None:
                    return self.world.gate_of(self, message)
                gates.forget(self.pid)  # the worker is gone; its supervisor hears it next
            if pipe is None or pipe in ready or self.proc.hung_up:
                self._look()

    def _close(self) -> None:
        self.ended = True
        if self in self.supervised.tenures:
            self.supervised.tenures.remove(self)

    def reply(self, action: Action) -> None:
        if action == "kill":
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)
            return
        channel = self.world.gates.channels.get(self.pid)
        if channel is not None:
            with contextlib.suppress(OSError):
                channel.send({"action": action})

    def beat(self) -> Beat:
        channel = self.world.gates.channels.get(self.pid)
        if channel is None or self.exit is not None:  # gone (its supervisor killed it, say)
            return Beat(present=False)
        channel.send({"action": "beat"})
        answer = channel.receive(MESSAGE_TIMEOUT)
        if answer is None or "beat" not in answer:
            raise RuntimeError(f"pool worker {self.start.label} did not answer a beat: {answer!r}")
        return Beat.from_json(answer["beat"])

    def signal(self, signum: int) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signum)

    def freeze(self) -> None:
        if not self.ended and not self.frozen:
            self.signal(signal.SIGSTOP)
            self.frozen = True
            self.hung = True

    def thaw(self) -> None:
        if not self.ended and self.frozen:
            self.signal(signal.SIGCONT)
            self.frozen = False

    def abandon(self) -> None:
        if self.ended:
            return
        self.thaw()
        self.signal(signal.SIGKILL)
        self._close()
