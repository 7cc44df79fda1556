"""The supervisor's worker processes, in three spawn modes (``--spawn``).

``pool`` (the default): up to ``max_workers`` long-lived processes forked from the
supervisor, started as claimed runs need them (plus one idle spare while there is room).
Each opens one :class:`~agent_runtime.loop.worker.Worker` (its connection and prepared
statements, its model and tool clients, the schema checked once) and takes run after run
over its pipe; before each later run it asks its connection for the time, and opens a new
Worker if that connection died while it waited (a server restart must cost no run an
attempt). ``fork``: a fresh fork per run that opens its own Worker and exits when the run
ends. ``exec``: the same with a fresh interpreter (``python -m agent_runtime run ...``).

Whatever the mode, a run ends for the supervisor with one code: the exit code a process of
its own would have had (``EXIT_DONE``, ``EXIT_CRASHED``, 4 resumable stop, 5 fenced, 6
needs attention, 70 a bug), or minus the signal that killed the process holding it. A
pool worker says it over its pipe and takes the next run; a process that dies holding a
run (a crash point's ``os._exit``, SIGKILL, the OOM killer) ends that run with its exit
status, exactly as a forked child does, and the supervisor replaces it.

The pipe (:func:`multiprocessing.Pipe`: pickled tuples over a socket pair)::

    supervisor -> worker   ("run", run_id, owner, generation, agent, input)
                                                  a lease claimed for it, and what the run is
    worker -> supervisor   ("ready",)                            its Worker is open
                           ("ended", run_id, code)               done with it; idle again

A pool worker carries nothing from one run to the next that fencing depends on: every run
is the lease the supervisor claimed for it, adopted under a fresh owner token
(``host:pid:nonce``), with a heartbeat of its own, and history read from the journal. It
exits instead of reporting when it is unfit for another run: after an unexpected error, a
database error, or with a connection closed, broken or inside a transaction; its exit code
is then the run's, and the supervisor starts a new process. The per-run crash plan is the
supervisor's (``CRASH_AT``, ``CRASH_SEQ``): every run reaches the same points, as every
forked child did; firing one kills the process.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import TYPE_CHECKING

import httpx
from psycopg.pq import TransactionStatus

from agent_runtime import config
from agent_runtime.errors import (
    EXIT_DONE,
    EXIT_SOFTWARE,
    AgentRuntimeError,
    ConfigError,
    DatabaseError,
    UnexpectedError,
)
from agent_runtime.loop.lease import owner_token
from agent_runtime.store import db
from agent_runtime.store.records import Lease, RunTask
from agent_runtime.tools.agent import Agent

if TYPE_CHECKING:
    from agent_runtime.loop.worker import Worker

log = logging.getLogger(__name__)

SPAWN_MODES = ("pool", "fork", "exec")
KILL_WAIT = 1.0  # seconds a kill waits for the process to be gone before going on
TRANSPORT_NAMES = ("model", "cloud")  # what a worker_transports factory may return

Transports = Callable[[], Mapping[str, httpx.BaseTransport]]
Handed = tuple[Lease, RunTask]  # a claimed lease and its run, as the claim read them


@dataclass(frozen=True, kw_only=True)
class WorkerSpec:
    """What every worker process of one supervisor is made from."""

    url: str
    settings: config.Settings
    agents: Sequence[Agent]
    agent_addresses: Sequence[str] = ()  # how an exec'd worker finds the agents (--agent)
    env: Mapping[str, str] | None = None  # an exec'd worker's environment (None: ours)
    # in-process remotes made in each forked worker (benchmarks, tests); None: the URLs
    transports: Transports | None = None


@dataclass(kw_only=True, eq=False)
class WorkerProcess:
    """The supervisor's handle on one worker process and the run it holds."""

    pid: int
    lease: Lease | None = None  # the run it works on now (None: an idle pool worker)
    popen: subprocess.Popen[bytes] | None = None  # exec mode
    channel: Connection | None = None  # pool mode: the pipe to it
    ready: bool = False  # pool mode: its Worker is open
    hung_up: bool = False  # pool mode: its end of the pipe is closed (it is exiting)
    exit_code: int | None = None
    killed_for: str | None = None  # why the supervisor killed it (hung, stuck), if it did

    @property
    def idle(self) -> bool:
        """A pool worker that can take a run now."""
        return self.channel is not None and self.lease is None and not self.hung_up

    def poll(self) -> int | None:
        """The exit code once the process is gone (minus the signal that killed it)."""
        if self.exit_code is not None:
            return self.exit_code
        if self.popen is not None:
            self.exit_code = self.popen.poll()
            return self.exit_code
        pid, status = os.waitpid(self.pid, os.WNOHANG)
        if pid == 0:
            return None
        self.exit_code = os.waitstatus_to_exitcode(status)
        return self.exit_code

    def fileno(self) -> int | None:
        """What to wait on for its next message (None: nothing to read)."""
        if self.channel is None or self.hung_up:
            return None
        return self.channel.fileno()

    def assign(self, lease: Lease, task: RunTask) -> bool:
        """Hand an idle pool worker its next run; False if it is gone."""
        assert self.channel is not None and self.lease is None
        try:
            self.channel.send(
                ("run", lease.run_id, lease.owner, lease.generation, task.agent, task.input)
            )
        except OSError:
            self.hung_up = True
            return False
        self.lease = lease
        return True

    def ended(self) -> list[tuple[Lease, int]]:
        """Read what it reported so far: the runs it is done with, and their codes."""
        done: list[tuple[Lease, int]] = []
        channel = self.channel
        while channel is not None and not self.hung_up and channel.poll():
            try:
                message = channel.recv()
            except (EOFError, OSError):
                self.hung_up = True
                break
            if message[0] == "ready":
                self.ready = True
            elif message[0] == "ended" and self._holds(message[1]):
                assert self.lease is not None
                done.append((self.lease, int(message[2])))
                self.lease = None
        return done

    def _holds(self, run_id: object) -> bool:
        return self.lease is not None and self.lease.run_id == run_id

    def close(self) -> None:
        if self.channel is not None:
            self.channel.close()

    def signal(self, signum: int) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signum)

    def kill(self, reason: str, wait: float = KILL_WAIT) -> None:
        """SIGKILL it for ``reason`` (said to its run); wait up to ``wait`` s for it to go, so
        the same sweep frees its run (one the kernel holds longer is reaped at SIGCHLD)."""
        self.killed_for = reason
        self.signal(signal.SIGKILL)
        deadline = time.monotonic() + wait
        while self.poll() is None and time.monotonic() < deadline:
            time.sleep(0.002)


# -- starting processes (the supervisor's side) ---------------------------------------------


def start_pool_worker(
    spec: WorkerSpec, first: Handed | None, inherited: Iterable[int]
) -> WorkerProcess:
    """Fork a long-lived worker; ``first``: the run it starts on (None: it waits for one)."""
    ours, theirs = multiprocessing.Pipe(duplex=True)
    try:
        pid = _fork(lambda: serve(spec, theirs, first), [*inherited, ours.fileno()])
    finally:
        theirs.close()
    return WorkerProcess(pid=pid, lease=first[0] if first else None, channel=ours)


def start_one_run(
    spec: WorkerSpec, lease: Lease, task: RunTask, mode: str, inherited: Iterable[int]
) -> WorkerProcess:
    """A process for one run only (``fork`` or ``exec``), gone when the run ends. An exec'd
    process reads ``task`` from the journal itself."""
    if mode == "exec":
        popen = subprocess.Popen(_exec_command(spec, lease), env=_exec_env(spec))
        return WorkerProcess(pid=popen.pid, lease=lease, popen=popen)
    pid = _fork(lambda: run_in_own_process(spec, lease, task), inherited)
    return WorkerProcess(pid=pid, lease=lease)


def _fork(body: Callable[[], int], inherited: Iterable[int]) -> int:
    """Fork a child that runs ``body`` and leaves with its code; never returns into the
    supervisor's loop. ``inherited``: descriptors of the supervisor's the child closes."""
    for handler in logging.getLogger().handlers:
        handler.flush()
    pid = os.fork()
    if pid:
        return pid
    code = EXIT_SOFTWARE
    try:
        signal.set_wakeup_fd(-1)
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGCHLD):
            signal.signal(sig, signal.SIG_DFL)
        for fd in inherited:  # other workers' pipes: theirs must see EOF when we exit
            with contextlib.suppress(OSError):
                os.close(fd)
        code = body()
    finally:
        for handler in logging.getLogger().handlers:
            handler.flush()
        os._exit(code)


def _exec_command(spec: WorkerSpec, lease: Lease) -> list[str]:
    agents = [arg for address in spec.agent_addresses for arg in ("--agent", address)]
    return [
        sys.executable,
        "-m",
        "agent_runtime",
        "run",
        "--run-id",
        lease.run_id,
        "--owner",
        lease.owner,
        "--generation",
        str(lease.generation),
        *agents,
    ]


def _exec_env(spec: WorkerSpec) -> dict[str, str]:
    s = spec.settings
    env = dict(spec.env if spec.env is not None else os.environ)
    env["DATABASE_URL"] = spec.url
    env.setdefault("CLOUD_URL", s.cloud_url)
    env.setdefault("MODEL_URL", s.model_url)
    env["LEASE"] = str(s.lease)
    env["HEARTBEAT"] = str(s.heartbeat)
    env["RUN_BACKOFF"] = str(s.run_backoff)
    env["RUN_BACKOFF_CAP"] = str(s.run_backoff_cap)
    return env


# -- inside a worker process ----------------------------------------------------------------


def serve(spec: WorkerSpec, channel: Connection, first: Handed | None) -> int:
    """A pool worker's life: open a Worker once, then run what the supervisor sends. Its
    exit code once the supervisor has hung up and the run in hand is over (an orphan
    finishes what it holds), or the code of a run after which it is unfit to go on."""
    opened = open_worker(spec, first[0].run_id if first is not None else None)
    if isinstance(opened, int):
        return opened
    worker = opened
    try:
        heard = _say(channel, ("ready",))
        handed = first
        while True:
            if handed is None:
                handed = _next_lease(channel) if heard else None
                if handed is None:
                    return EXIT_DONE
            lease, task = handed
            if handed is not first:  # its connection may have died while it waited
                opened = _answering(spec, worker, lease.run_id)
                if isinstance(opened, int):
                    return opened
                worker = opened
            code, fit = run_leased(worker, lease, task)
            if not fit:
                return code
            heard = heard and _say(channel, ("ended", lease.run_id, code))
            handed = None
    finally:
        with contextlib.suppress(Exception):
            worker.close()


def _say(channel: Connection, message: tuple[object, ...]) -> bool:
    """Tell the supervisor; False if it is gone."""
    try:
        channel.send(message)
    except OSError:
        return False
    return True


def _next_lease(channel: Connection) -> Handed | None:
    """The next run the supervisor hands us; None once it hung up (closed, or died)."""
    try:
        message = channel.recv()
    except (EOFError, OSError):
        return None
    _, run_id, owner, generation, agent, task_input = message
    lease = Lease(run_id=run_id, owner=owner, generation=generation)
    return lease, RunTask(agent=agent, input=task_input)


def run_in_own_process(spec: WorkerSpec, lease: Lease, task: RunTask | None = None) -> int:
    """A forked child's one run: its own Worker, the run, the run's exit code."""
    opened = open_worker(spec, lease.run_id)
    if isinstance(opened, int):
        return opened
    try:
        code, _ = run_leased(opened, lease, task)
    finally:
        opened.close()
    return code


def open_worker(spec: WorkerSpec, run_id: str | None) -> Worker | int:
    """The process's Worker, or the exit code of a failure to make one (said in one ERROR
    line naming the run it was started for)."""
    from agent_runtime.loop.worker import (
        Worker,  # the worker's imports stay out of the supervisor's start
    )

    named = f" run={run_id}" if run_id is not None else ""
    try:
        remotes = dict(spec.transports()) if spec.transports is not None else {}
        unknown = sorted(set(remotes) - set(TRANSPORT_NAMES))
        if unknown:
            raise ConfigError(
                f"worker_transports may name {' and '.join(TRANSPORT_NAMES)}, not {unknown}"
            )
        return Worker.open(
            spec.settings,
            spec.url,
            agents=spec.agents,
            model_transport=remotes.get("model"),
            cloud_transport=remotes.get("cloud"),
        )
    except AgentRuntimeError as exc:
        if not exc.reported:
            log.error("%s%s error=%r", type(exc).__name__, named, str(exc))
        return exc.exit_code
    except Exception as exc:  # a bug before any run was held: the supervisor records why
        log.error("unexpected%s error=%r", named, f"{type(exc).__name__}: {exc}", exc_info=exc)
        return EXIT_SOFTWARE


def run_leased(worker: Worker, lease: Lease, task: RunTask | None = None) -> tuple[int, bool]:
    """Drive a run the supervisor claimed: (its exit code, whether this worker may take
    another). The lease is adopted under a new owner token: nothing of an earlier run's
    ownership is reused. ``task``: the run's agent and input as the claim read them (None:
    read from the journal)."""
    worker.owner = owner_token()
    try:
        outcome = worker.run(lease.run_id, lease=lease, create=False, task=task)
    except AgentRuntimeError as exc:
        if not exc.reported:
            log.error("%s run=%s error=%r", type(exc).__name__, lease.run_id, str(exc))
        unfit = isinstance(exc, DatabaseError | UnexpectedError)
        return exc.exit_code, not unfit and connection_fit(worker)
    except Exception as exc:  # a bug before the run was held: the supervisor records why
        log.error(
            "unexpected run=%s error=%r", lease.run_id, f"{type(exc).__name__}: {exc}", exc_info=exc
        )
        return EXIT_SOFTWARE, False
    worker.crash.missed(lease.run_id, outcome.steps)  # a CRASH_AT this run never reached
    return EXIT_DONE, connection_fit(worker)


def _answering(spec: WorkerSpec, worker: Worker, run_id: str) -> Worker | int:
    """``worker``, or a new one if its connection no longer answers (the server restarted
    while it waited: that must cost the run it is handed no attempt); or the exit code."""
    try:
        db.run(worker.journal.conn, "clock_now")
    except DatabaseError:
        with contextlib.suppress(Exception):
            worker.close()
        return open_worker(spec, run_id)
    return worker


def connection_fit(worker: Worker) -> bool:
    """The worker's connection can carry another run: open, not broken, no transaction."""
    conn = worker.journal.conn
    if conn.closed or conn.broken:
        return False
    return conn.info.transaction_status == TransactionStatus.IDLE
