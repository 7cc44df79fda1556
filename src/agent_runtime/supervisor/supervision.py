"""The :class:`Supervisor`: its loop, its sweep, and the worker processes it hands runs to.

Every ``poll`` seconds (and at once whenever one of its workers is done with a run or
exits) a sweep kills the busy workers that hung or are stuck
(:mod:`agent_runtime.supervisor.takeback`),
gives up on runs that failed too often for too long, claims what capacity allows and
hands each run to a worker (:mod:`agent_runtime.supervisor.workerpool`), and replaces the pool
workers that died. :mod:`agent_runtime.supervisor` is the command around it.
"""

from __future__ import annotations

import logging
import os
import select
import signal
import threading
import time
from collections.abc import Sequence
from types import FrameType

from agent_runtime import config
from agent_runtime.clients import tls_context
from agent_runtime.errors import EXIT_DONE, DatabaseError, InvalidRunId
from agent_runtime.loop.lease import owner_token
from agent_runtime.observe import metrics
from agent_runtime.store import db
from agent_runtime.store.journal import Journal
from agent_runtime.store.prune import PruneTimer
from agent_runtime.store.records import Lease, RunTask
from agent_runtime.store.runid import check_run_id
from agent_runtime.supervisor.takeback import Watchdog, free_after_exit
from agent_runtime.supervisor.unserved import UnservedWatch
from agent_runtime.supervisor.workerpool import (
    SPAWN_MODES,
    Handed,
    Transports,
    WorkerProcess,
    WorkerSpec,
    start_one_run,
    start_pool_worker,
)
from agent_runtime.tools.agent import Agent, by_name

log = logging.getLogger(__name__)

STOP_GRACE = 5.0  # seconds a stopping supervisor waits for its workers to exit


class Supervisor:
    """Keeps runs moving: claims the runs of its agents whose lease expired (a dead or hung
    worker's, a released run's after its backoff), starts a worker for each, kills workers that
    stop making progress, and fails runs that never do (``python -m agent_runtime.supervisor``).
    """

    def __init__(
        self,
        url: str,
        settings: config.Settings,
        *,
        spawn: str = "pool",
        worker_env: dict[str, str] | None = None,
        agents: Sequence[Agent] | None = None,
        agent_addresses: Sequence[str] | None = None,
        worker_transports: Transports | None = None,
    ) -> None:
        """``spawn``: how workers are started (:mod:`agent_runtime.supervisor.workerpool`);
        ``agents``: the agents whose runs it takes (default: the provisioning agent);
        ``agent_addresses``: how an ``exec`` worker finds them (``--agent`` values);
        ``worker_transports``: made in each forked worker, its in-process remotes by name
        (``model``, ``cloud``; benchmarks and tests)."""
        if spawn not in SPAWN_MODES:
            raise ValueError(f"spawn must be one of {SPAWN_MODES}, got {spawn!r}")
        if worker_transports is not None and spawn == "exec":
            raise ValueError(
                "worker_transports are made in a forked worker; use spawn='pool' or 'fork'"
            )
        if agents is None:
            from agent_runtime.tools.provisioning import agent as provisioning

            agents = [provisioning]
        self.agents = list(by_name(list(agents)).values())
        self.url = url
        self.settings = settings
        self.spawn = spawn
        self.spec = WorkerSpec(
            url=url,
            settings=settings,
            agents=self.agents,
            agent_addresses=list(agent_addresses or []),
            env=worker_env,
            transports=worker_transports,
        )
        self.owner = owner_token()
        self.workers: dict[int, WorkerProcess] = {}  # by pid: every process it started
        self.stopping = False
        self._spare_failed = False  # the last spare died before it was ready: no more yet
        self._owed = 0  # pool workers that died and are not replaced yet
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)
        self.conn = db.connect(url, application_name="agent_runtime.supervisor")
        db.ensure_schema(self.conn)
        self.journal = Journal(self.conn)
        self.backoff = settings.run_backoff_rule()
        self.watchdog = Watchdog(lease=settings.lease, stuck_after=settings.stuck_after)
        self._next_watch = 0.0  # time.monotonic() of the next check for hung workers
        self.unserved = UnservedWatch([a.name for a in self.agents], settings.poll)
        self.pruning = PruneTimer(settings.prune_after)  # never, unless --prune-after
        tls_context()  # built once here, inherited by every forked worker

    @property
    def busy(self) -> list[WorkerProcess]:
        """The workers holding a run now."""
        return [w for w in self.workers.values() if w.lease is not None]

    # -- signals -------------------------------------------------------------------------

    def _on_stop(self, signum: int, frame: FrameType | None) -> None:
        self.stopping = True

    def install_signals(self) -> None:
        """SIGTERM/SIGINT stop the loop cleanly; SIGCHLD wakes it the moment a worker exits."""
        self._watch_children()
        signal.signal(signal.SIGTERM, self._on_stop)
        signal.signal(signal.SIGINT, self._on_stop)

    def _watch_children(self) -> None:
        if threading.current_thread() is threading.main_thread():
            signal.set_wakeup_fd(self._wake_w, warn_on_full_buffer=False)
            signal.signal(signal.SIGCHLD, lambda signum, frame: None)

    # -- one sweep -----------------------------------------------------------------------

    def reap(self) -> list[tuple[Lease, int]]:
        """Take in every run a worker is done with and every worker process that is gone;
        free what a dead worker held, and start a pool worker's replacement at once."""
        ended: list[tuple[Lease, int, WorkerProcess]] = []
        for proc in list(self.workers.values()):
            code = proc.poll()  # first: once it is gone, all it said is in the pipe
            was_ready = proc.ready
            ended.extend((lease, done, proc) for lease, done in proc.ended())
            if proc.ready and not was_ready:
                self._spare_failed = False  # workers open again: a spare may be tried
            if code is None:
                continue
            del self.workers[proc.pid]
            proc.close()
            if proc.lease is not None:
                ended.append((proc.lease, code, proc))
            elif proc.channel is not None:
                log.info("worker-gone pid=%d code=%s", proc.pid, code)
                self._spare_failed = self._spare_failed or not proc.ready
            if proc.channel is not None and proc.ready:
                self._owed += 1  # replaced by the sweep, once its run has been handed on
        for lease, code, proc in ended:
            log.info("worker-exited run=%s code=%s pid=%d", lease.run_id, code, proc.pid)
            if code != EXIT_DONE:
                try:
                    self._after_exit(lease, code, proc.killed_for)
                except DatabaseError as exc:  # the lease will run out by itself
                    log.warning("release-failed run=%s error=%r", lease.run_id, str(exc))
        return [(lease, code) for lease, code, _ in ended]

    def _after_exit(self, lease: Lease, code: int, reason: str | None = None) -> None:
        """Free the run of a worker that ended holding it (``reason``: why we killed it)."""
        free_after_exit(
            self.journal, self.backoff, lease, code, stopping=self.stopping, reason=reason
        )

    def watch(self) -> bool:
        """Kill the busy workers that hung or are stuck (:mod:`agent_runtime.supervisor.takeback`),
        checked at most twice a poll; True if it killed any (:meth:`reap` frees their runs)."""
        now = time.monotonic()
        if self.stopping or now < self._next_watch:
            return False
        self._next_watch = now + self.settings.poll / 2
        verdicts = self.watchdog.check(self.conn, self.busy)
        for verdict in verdicts:
            pid = verdict.proc.pid
            log.warning(
                "%s run=%s pid=%d %s action=killed",
                verdict.event,
                verdict.run_id,
                pid,
                verdict.measure,
            )
            verdict.proc.kill(verdict.reason)
        return bool(verdicts)

    def sweep(self) -> list[WorkerProcess]:
        """Kill the workers that hung or are stuck and free their runs, give up on
        exhausted runs, claim and start what capacity allows, then replace the pool
        workers that died (after the claims: a dead worker's run goes to an open spare
        first, not behind a fork) and keep a spare."""
        if self.watch():
            self.reap()
        started = self._claim()
        if self.spawn == "pool":
            owed, self._owed = self._owed, 0
            for _ in range(owed):
                if self._room():
                    self._start_pool_worker(None)  # the pool keeps its size
            self._keep_spare()
        return started

    def _claim(self) -> list[WorkerProcess]:
        s = self.settings
        limits = {"max_attempts": s.max_attempts, "give_up_after": s.give_up_after}
        for row in db.run(self.conn, "give_up_exhausted", limits):
            log.warning("gave-up run=%s reason=%r", row["id"], row["failure"])
            metrics.count_give_up()
        self.unserved.maybe_look(self.conn)  # runs of agents it has not: named once each
        self.pruning.maybe_prune(self.conn)  # final runs past --prune-after, once a minute
        free = self.settings.max_workers - len(self.busy)
        if free <= 0 or self.stopping:
            return []
        rows = db.run(
            self.conn,
            "claim_expired",
            {
                "owner": self.owner,
                "lease": self.settings.lease,
                "limit": free,
                "max_attempts": self.settings.max_attempts,
                "agents": [a.name for a in self.agents],
            },
        )
        started = []
        for row in rows:
            metrics.count_claim(row["reason"])
            lease = Lease(run_id=row["id"], owner=row["owner"], generation=row["generation"])
            if not self._startable(lease):
                continue
            proc = self._start(lease, RunTask(agent=row["agent"], input=row["input"]))
            log.info("resuming run=%s pid=%d", lease.run_id, proc.pid)
            started.append(proc)
        return started

    def _keep_spare(self) -> None:
        """In the pool, one idle worker beside the busy ones while there is room, so the
        run of a worker that dies goes to an open worker at once instead of waiting for a
        new one to open. Only once a worker has opened (a worker that cannot open is not
        started again and again), and not again after a spare died before it was ready."""
        if self._spare_failed or not self._room():
            return
        workers = self.workers.values()
        if any(w.ready for w in workers) and not any(w.idle for w in workers):
            self._start_pool_worker(None)

    def _startable(self, lease: Lease) -> bool:
        """A run whose id no worker would accept (written by an older version, or straight
        into the table) is failed with the reason instead of handed to a worker."""
        try:
            check_run_id(lease.run_id)
        except InvalidRunId as exc:
            reason = f"{type(exc).__name__}: {exc}"
            self.journal.fail(lease, reason)
            log.warning("refused run=%s reason=%r", lease.run_id, reason)
            return False
        return True

    def _start(self, lease: Lease, task: RunTask) -> WorkerProcess:
        """The process that takes ``lease``: an idle pool worker (one that is open first),
        a new pool worker, or a process of its own (``fork``, ``exec``). ``task``: the
        run's agent and input as the claim read them, handed over with the lease."""
        if self.spawn != "pool":
            proc = start_one_run(self.spec, lease, task, self.spawn, self._inherited())
            self.workers[proc.pid] = proc
            return proc
        for proc in sorted(self.workers.values(), key=lambda w: not w.ready):
            if proc.idle and proc.assign(lease, task):
                return proc
        return self._start_pool_worker((lease, task))

    def _start_pool_worker(self, first: Handed | None) -> WorkerProcess:
        proc = start_pool_worker(self.spec, first, self._inherited())
        self.workers[proc.pid] = proc
        log.info("worker-started pid=%d", proc.pid)
        return proc

    def _room(self) -> bool:
        """Whether a replacement pool worker may start: never more than ``max_workers``
        processes (a claim that finds none idle starts its own), none once stopping."""
        return not self.stopping and len(self.workers) < self.settings.max_workers

    def _inherited(self) -> list[int]:
        """The descriptors a forked worker must not keep: the other workers' pipes (their
        hang-up must reach them), the wake-up pipe, the supervisor's connection."""
        fds = [self._wake_r, self._wake_w]
        if not self.conn.closed:
            fds.append(self.conn.fileno())
        return fds + [fd for w in self.workers.values() if (fd := w.fileno()) is not None]

    # -- the loop ------------------------------------------------------------------------

    def wait(self, timeout: float) -> None:
        """Sleep until ``timeout`` passes, a signal arrives, a worker says it is done with
        a run, or one exits."""
        if self.stopping:
            return
        self._wait(timeout)

    def _wait(self, timeout: float) -> None:
        pipes = [fd for w in self.workers.values() if (fd := w.fileno()) is not None]
        ready, _, _ = select.select([self._wake_r, *pipes], [], [], timeout)
        if self._wake_r in ready:
            try:
                while os.read(self._wake_r, 512):
                    pass
            except BlockingIOError:
                pass

    def serve(self, *, once: bool = False) -> int:
        """Claim and run until stopped (SIGINT/SIGTERM); ``once``: one sweep, then wait for
        its workers and return. The process exit code."""
        s = self.settings
        log.info(
            "supervisor lease=%s poll=%s heartbeat=%s max_workers=%d max_attempts=%d "
            "give_up_after=%s run_backoff=%s run_backoff_cap=%s stuck_after=%s prune_after=%s "
            "agents=%s",
            s.lease,
            s.poll,
            s.heartbeat,
            s.max_workers,
            s.max_attempts,
            s.give_up_after,
            s.run_backoff,
            s.run_backoff_cap,
            s.stuck_after,
            "never" if s.prune_after is None else s.prune_after,
            ",".join(a.name for a in self.agents),
        )
        try:
            while not self.stopping:
                try:
                    self.reap()
                    self.sweep()
                except DatabaseError as exc:  # keep supervising; leases settle the rest
                    log.warning("supervisor-db-error error=%r", str(exc))
                    self._reconnect()
                if once and not self.busy:
                    break
                self.wait(s.poll)
        finally:
            self.shutdown()
        return 0

    def _reconnect(self) -> None:
        self.conn.close()
        try:
            self.conn = db.connect(self.url, application_name="agent_runtime.supervisor")
        except DatabaseError as exc:
            log.warning("supervisor-db-unreachable error=%r", str(exc))
        self.journal = Journal(self.conn)

    def drain(self) -> None:
        """Run until no run is claimable and no worker holds one (tests and benchmarks);
        idle pool workers stay until :meth:`shutdown`."""
        self._watch_children()
        while True:
            self.reap()
            started = self.sweep()
            if not started and not self.busy:
                return
            self.wait(self.settings.poll)

    def shutdown(self) -> None:
        """Stop workers and hand their runs back at once, so nothing waits on a lease."""
        self.stopping = True  # no replacements, no new claims, from here on
        for proc in self.workers.values():
            proc.signal(signal.SIGTERM)
        deadline = time.monotonic() + STOP_GRACE
        while self.workers and time.monotonic() < deadline:
            self.reap()
            if self.workers:
                self._wait(0.05)
        for proc in list(self.workers.values()):
            proc.signal(signal.SIGKILL)
        while self.workers:
            self.reap()
            if self.workers:
                self._wait(0.01)
        log.info("supervisor-stopped")
        if threading.current_thread() is threading.main_thread():
            signal.set_wakeup_fd(-1)
        self.conn.close()
        os.close(self._wake_r)
        os.close(self._wake_w)
