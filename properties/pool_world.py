"""The real supervisors and their pools, as the schedule runner sees them.

:class:`PoolWorld` holds the pool mode's supervisors (the main one, and a rival on the
same database), each a real :class:`~agent_runtime.supervisor.Supervisor` with
``spawn="pool"`` built in the runner's process: its claims, its hand-outs, its reaping,
its replacements and its spare are its own code; the runner only decides *when* it runs
one pass (``reap()`` then ``sweep()``, its loop's body) and waits for its workers' gates
(:class:`~properties.pool_pilot.PoolPilot`).

An end's code is all the supervisor learns; the kind of ending the runner's judgement
needs (``LeaseLost``, ``RemoteUnavailable``, ...) is read from the journal: the reason
the worker recorded when it released the run, the generation that fenced it, the status
that parked it (:meth:`PoolWorld.kind_of`).
"""

from __future__ import annotations

import contextlib
import math
import os
import signal
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from agent_runtime.config import Settings
from agent_runtime.errors import DatabaseError
from agent_runtime.store import db
from agent_runtime.supervisor.main import Supervisor
from agent_runtime.supervisor.main import _pool_counts as pool_counts  # what /metrics serves
from agent_runtime.supervisor.workerpool import WorkerProcess

from . import sqlfile
from .agents import suite_agents
from .pilots import CRASHED, DONE, Gate, GatePlan, no_jitter
from .pool_gate import ChildSetup, GateHook, GateServer
from .pool_pilot import PoolPilot
from .pool_stop import shut_down
from .violations import Violation

MAX_WORKERS: Final = 8  # per supervisor: room for every run, its zombies and a spare
# The pool workers' heartbeat thread is stopped at each run's first gate (the runner beats);
# its interval only has to outlast the moments before that gate.
POOL_HEARTBEAT: Final = 11.0  # seconds
READY_WAIT: Final = 10.0  # seconds a new pool worker may take to open its Worker
SIGTERMED: Final = "SIGTERM"  # exit kind of a pool worker stopped by SIGTERM


@dataclass(eq=False)
class Supervised:
    """One supervisor of the pool mode and what the runner knows about its workers."""

    name: str  # main | rival
    supervisor: Supervisor
    tenures: list[PoolPilot] = field(default_factory=list)  # open ones


class PoolWorld:
    """The pool mode's supervisors, the gates of their workers, and the runner's view."""

    def __init__(
        self,
        url: str,
        settings: Settings,
        *,
        support_url: str,
        log_dir: Path,
        conn: Callable[[], db.Connection],
        expect_agent: Callable[[str], str | None],
    ) -> None:
        self.url = url
        self.supervisor_class = Supervisor  # tests plant a broken one here
        self.gates = GateServer(log_dir)
        self.settings = settings.with_changes(
            heartbeat=POOL_HEARTBEAT,
            max_workers=MAX_WORKERS,
            crash=GatePlan(hook=GateHook(self.gates.path)),
        )
        self.agents = list(suite_agents(support_url).values())
        self.setup = ChildSetup(log_dir / "pool-workers.log", self._foreign_fds)
        self._conn = conn
        self.expect_agent = expect_agent
        self.supervisors: dict[str, Supervised] = {}
        self.orphans: set[int] = set()  # pids of workers whose supervisor died
        self.orphan_codes: dict[int, int] = {}  # ... and how those that are gone ended
        self.poisoned: set[int] = set()  # pids whose connection died with the database
        self.due: list[Supervised] = []  # supervisors that heard an end since their pass
        self.problems: list[Violation] = []
        self.died: list[PoolPilot] = []  # tenures that died holding a run, since the pass
        self.early: dict[tuple[str, str, int], int] = {}  # ends heard before their pilot
        self.served: dict[int, int] = {}  # runs each pool worker was handed, by pid

    # -- supervisors ----------------------------------------------------------------------

    def _foreign_fds(self) -> list[int]:
        """In a new pool worker: every supervisor's pipes, wake-up pipe and connection,
        and the runner's gate sockets (its own supervisor's, the worker closed already)."""
        fds = [self.gates.listener.fileno(), *(c.fileno() for c in self.gates.channels.values())]
        for s in self.supervisors.values():
            sup = s.supervisor
            fds += [sup._wake_r, sup._wake_w]
            if not sup.conn.closed:
                fds.append(sup.conn.fileno())
            fds += [fd for w in sup.workers.values() if (fd := w.fileno()) is not None]
        return fds

    def supervised(self, name: str) -> Supervised:
        """The supervisor ``name``, started if none runs (a stopped or killed one is
        started again, as whatever keeps the service up would)."""
        current = self.supervisors.get(name)
        if current is None:
            supervisor = self.supervisor_class(
                self.url,
                self.settings,
                spawn="pool",
                agents=self.agents,
                worker_transports=self.setup,
            )
            supervisor.backoff = self.settings.run_backoff_rule(no_jitter)  # replays exactly
            current = self.supervisors[name] = Supervised(name=name, supervisor=supervisor)
        return current

    def reap(self, s: Supervised) -> None:
        """The supervisor takes in what its workers said and which of them died."""
        ended = s.supervisor.reap()
        for lease, code in ended:
            key = (lease.run_id, lease.generation)
            tenure = next(
                (t for t in s.tenures if (t.lease.run_id, t.lease.generation) == key), None
            )
            if tenure is None:  # handed out in this pass, not piloted yet: it ended at once
                self.early[(s.name, *key)] = code
            else:
                self.ended(tenure, code)
        if ended and s not in self.due:
            self.due.append(s)

    def ended(self, tenure: PoolPilot, code: int) -> None:
        if tenure.exit is None:
            tenure.end(code)
            if code == 1 or code < 0:
                self.died.append(tenure)

    def adopt(self, tenure: PoolPilot) -> None:
        """A new tenure's pilot: its end, if the supervisor heard it already."""
        tenure.supervised.tenures.append(tenure)
        self.served[tenure.pid] = self.served.get(tenure.pid, 0) + 1
        key = (tenure.supervised.name, tenure.lease.run_id, tenure.lease.generation)
        code = self.early.pop(key, None)
        if code is not None:
            self.ended(tenure, code)

    def sweep(self, s: Supervised) -> list[WorkerProcess]:
        """One pass of the supervisor's loop (``reap()``, ``sweep()``); the workers it
        handed runs to. Before it, every new worker has opened (so which worker takes a run
        does not depend on how fast a fork was)."""
        supervisor = s.supervisor
        for proc in list(supervisor.workers.values()):
            opening = proc.channel is not None and not proc.ready and not proc.hung_up
            # neither opened nor gone: a worker whose hello was lost, or never sent
            if opening and proc.channel is not None and not proc.channel.poll(READY_WAIT):
                self.problems.append(
                    Violation(
                        "pool_ready",
                        None,
                        None,
                        f"pool worker {proc.pid} of the {s.name} supervisor is not ready "
                        f"{READY_WAIT:g}s after it started, and has not gone",
                    )
                )
        self.reap(s)
        # Its watchdog runs at most twice a poll of real time: left to that, whether a sweep
        # event kills a hung worker would depend on how busy the machine is. A sweep event
        # is a poll's worth of time, so it always watches, here, where the world hears the
        # deaths it causes (the sweep's own reap would take them in unheard).
        supervisor._next_watch = 0.0
        try:
            if supervisor.watch():
                self.reap(s)
        except DatabaseError:  # its loop's answer: log, reconnect, go on (the sweep below)
            supervisor._reconnect()
        supervisor._next_watch = math.inf  # the sweep below does not watch again
        self._check_gauge(s)
        if s in self.due:
            self.due.remove(s)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # fork with threads (3.12+)
            try:
                return supervisor.sweep()
            except DatabaseError:  # its loop's answer: log, reconnect, go on
                supervisor._reconnect()
                return supervisor.sweep()

    def _check_gauge(self, s: Supervised) -> None:
        """**busy_gauge**: the busy workers ``/metrics`` would report now (the command's
        ``_pool_counts``) are the supervisor's workers whose runs the world sees open."""
        total, busy = pool_counts(s.supervisor)
        holding = sum(1 for t in s.tenures if t.exit is None)
        if (total, busy) != (len(s.supervisor.workers), holding):
            self.problems.append(
                Violation(
                    "busy_gauge",
                    None,
                    None,
                    f"the {s.name} supervisor's /metrics would say {busy} of {total} workers "
                    f"busy; {holding} of its {len(s.supervisor.workers)} hold a run",
                )
            )

    def stop(self, name: str) -> list[PoolPilot]:
        """SIGTERM to the supervisor: it stops every worker and hands their runs back."""
        s = self.supervisors.pop(name, None)
        if s is None:
            return []
        stopped = list(s.tenures)
        for tenure in stopped:
            tenure.terminated = True
            if tenure.frozen:  # a stopped process takes its SIGTERM once continued
                tenure.signal(signal.SIGTERM)
                tenure.thaw()
        s.supervisor.stopping = True  # what its SIGTERM handler does; serve() then stops
        heard = shut_down(s.supervisor, name, self.problems)  # how each really ended
        for tenure in stopped:
            code = heard.get((tenure.lease.run_id, tenure.lease.generation), tenure.proc.exit_code)
            tenure.end(-signal.SIGTERM if code is None else code)
            self.gates.forget(tenure.pid)
        return stopped

    def hang_up(self, name: str) -> list[PoolPilot]:
        """The supervisor dies (SIGKILL): its pipes close; busy workers become orphans."""
        s = self.supervisors.pop(name, None)
        if s is None:
            return []
        supervisor = s.supervisor
        for proc in supervisor.workers.values():
            proc.close()
            self.orphans.add(proc.pid)
        for tenure in s.tenures:
            tenure.orphan = True
        with contextlib.suppress(Exception):
            supervisor.conn.close()
        for fd in (supervisor._wake_r, supervisor._wake_w):  # a dead process's own pipe
            with contextlib.suppress(OSError):
                os.close(fd)
        return list(s.tenures)

    def orphan_exit(self, pid: int, *, wait: bool = False) -> int | None:
        """The exit code of orphan ``pid`` once it is gone (None: still running)."""
        if pid in self.orphan_codes:
            return self.orphan_codes[pid]
        try:
            done, status = os.waitpid(pid, 0 if wait else os.WNOHANG)
        except ChildProcessError:
            done, status = pid, 0
        if not done:
            return None
        self.orphans.discard(pid)
        code = self.orphan_codes[pid] = os.waitstatus_to_exitcode(status)
        return code

    def collect_orphans(self, *, kill: bool = False) -> None:
        """Wait for the orphans that exited (``kill``: end them first)."""
        for pid in list(self.orphans):
            if kill:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGCONT)
                    os.kill(pid, signal.SIGKILL)
            self.orphan_exit(pid, wait=kill)

    def database_crashed(self) -> None:
        """Every worker's connection died with the server: its next run fails, and it
        leaves the pool. The supervisors reconnect (their loop would at its next pass)."""
        for s in self.supervisors.values():
            self.poisoned.update(s.supervisor.workers)
            s.supervisor._reconnect()

    # -- gates and endings ----------------------------------------------------------------

    def gate_of(self, tenure: PoolPilot, message: dict[str, object]) -> Gate:
        """A gate a worker reported, checked against the run it was handed."""
        gate = message["gate"]
        assert isinstance(gate, list)
        point, seq = str(gate[0]), int(gate[1])
        tenure.owner = str(message["owner"])
        backend = message.get("backend_pid")
        tenure.backend_pid = int(backend) if isinstance(backend, int) else None
        run, generation, agent = message["run"], message["generation"], message["agent"]
        if (run, generation) != (tenure.lease.run_id, tenure.lease.generation):
            self.problems.append(
                Violation(
                    "pool_one_run",
                    tenure.lease.run_id,
                    int(seq),
                    f"pool worker {tenure.pid} was handed {tenure.lease.run_id} (generation "
                    f"{tenure.lease.generation}) and reached {point} of {run} (generation "
                    f"{generation}): a worker drives the one run it holds",
                )
            )
        expected = self.expect_agent(str(run))
        if expected is not None and agent != expected:
            self.problems.append(
                Violation(
                    "pool_agent",
                    str(run),
                    int(seq),
                    f"pool worker {tenure.pid} drove it with agent {agent}, not its own "
                    f"{expected}: a long-lived worker must take each run's agent afresh",
                )
            )
        return Gate(point=str(point), seq=int(seq))

    def kind_of(self, tenure: PoolPilot, code: int) -> str:
        """How a run ended, from its exit code and what the journal says."""
        if code in (1, -signal.SIGKILL):
            return CRASHED
        if code == -signal.SIGTERM:
            return SIGTERMED
        if code == 0 and not tenure.orphan:
            return DONE
        fixed = {6: "NeedsAttention", 70: "UnexpectedError", 3: "failed (exit 3)"}
        if code in fixed:
            return fixed[code]
        try:
            row = sqlfile.one(self._conn(), "pool_run_state", {"run": tenure.lease.run_id})
        except DatabaseError:
            row = None
        if row is None:
            return f"exit {code}"
        if row["status"] == "done" and code == 0:
            return DONE
        if row["generation"] > tenure.lease.generation:
            return "LeaseLost"
        if row["status"] == "needs_attention":
            return "NeedsAttention"
        if code == 5:  # refused its run, same generation: parked or cancelled before it began
            return "RunUnavailable"
        if code == 4 and tenure.pid in self.poisoned:  # its connection died with the server:
            return "DatabaseError"  # whatever else happened to its run meanwhile (a cancel)
        failure = row["failure"] or ""
        if failure.startswith("the worker exited with code"):  # it could not say why itself
            return "DatabaseError"
        if row["owner"] is None and failure:
            return failure.split(":", 1)[0]
        if code == 4 and row["owner"] is not None:  # resumable, and neither the worker nor a
            # supervisor could record why (its supervisor gone too): the database was
            return "DatabaseError"
        return "RunUnavailable" if code == 5 else f"exit {code}"

    # -- the end of a schedule ------------------------------------------------------------

    def cleanup(self) -> None:
        """Stop every supervisor and its workers, and every orphan; forget every gate."""
        for name in list(self.supervisors):
            s = self.supervisors[name]
            for proc in s.supervisor.workers.values():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(proc.pid, signal.SIGCONT)
            for tenure in s.tenures:
                tenure.ended = True
            self.supervisors.pop(name)
            s.supervisor.stopping = True
            s.supervisor.shutdown()
        self.collect_orphans(kill=True)
        self.orphan_codes.clear()
        self.gates.clear()
        self.poisoned.clear()
        self.due.clear()
        self.died.clear()
        self.early.clear()
        self.served.clear()
        self.problems.clear()

    def close(self) -> None:
        self.cleanup()
        self.gates.close()
