"""``python -m agent_runtime.supervisor``: restarts runs whose worker died.

Every ``poll`` seconds (and at once whenever one of its own workers exits) it
gives up on runs that failed too often for too long (``max_attempts`` claims *and*
``give_up_after`` seconds without progress), then claims up to ``max_workers`` runs
that are free past their backoff or whose lease ran out (``FOR UPDATE SKIP LOCKED``:
several supervisors may share a database without claiming one run twice) and starts a
fresh worker process on each. A run with a live lease is never touched, nor one that
waits out a backoff. Nothing restarts the supervisor itself; that is the job of whatever
keeps processes alive on the machine.

When one of its workers exits without finishing, it frees the run if the worker died
holding it (at once after a first death, with a backoff after deaths in a row; with the
exit code as the reason when the worker recorded none), and logs every backoff:
``backoff run=... attempt=... until=...``. A worker that raises an exception the
runtime did not expect logs its traceback, records the reason on the run, exits 70.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import select
import signal
import subprocess
import sys
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from types import FrameType

from . import config, db, logfmt
from ._version import version
from .agent import DEFAULT_AGENT, Agent, by_name
from .cli import agents_of
from .clients import tls_context
from .dbsource import database_url
from .errors import (
    EXIT_CRASHED,
    EXIT_DONE,
    EXIT_SOFTWARE,
    AgentRuntimeError,
    DatabaseError,
    InvalidRunId,
)
from .journal import Journal
from .lease import owner_token
from .records import Lease
from .runid import check_run_id

log = logging.getLogger(__name__)

SPAWN_MODES = ("fork", "exec")
STOP_GRACE = 5.0  # seconds a stopping supervisor waits for its workers to exit


@dataclass(kw_only=True)
class Child:
    lease: Lease
    pid: int
    popen: subprocess.Popen[bytes] | None = None  # None when forked
    exit_code: int | None = field(default=None)

    def poll(self) -> int | None:
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


def _run_forked_worker(
    settings: config.Settings, url: str, lease: Lease, agents: Sequence[Agent]
) -> int:
    """Body of a forked child: its own connection, its own clients, then os._exit."""
    from .worker import Worker

    try:
        worker = Worker.open(settings, url, agents=agents)  # its own token; it adopts the lease
        try:
            worker.run(lease.run_id, lease=lease, create=False)
        finally:
            worker.close()
    except AgentRuntimeError as exc:
        if not exc.reported:
            log.error("%s run=%s error=%r", type(exc).__name__, lease.run_id, str(exc))
        return exc.exit_code
    except Exception as exc:  # a bug before the run was held: the supervisor records why
        log.error(
            "unexpected run=%s error=%r", lease.run_id, f"{type(exc).__name__}: {exc}", exc_info=exc
        )
        return EXIT_SOFTWARE
    return EXIT_DONE


class Supervisor:
    def __init__(
        self,
        url: str,
        settings: config.Settings,
        *,
        spawn: str = "fork",
        worker_env: dict[str, str] | None = None,
        agents: Sequence[Agent] | None = None,
        agent_addresses: Sequence[str] | None = None,
    ) -> None:
        """``agents``: the agents whose runs it takes (default: the provisioning agent);
        ``agent_addresses``: how an ``exec`` worker finds them (``--agent`` values)."""
        if spawn not in SPAWN_MODES:
            raise ValueError(f"spawn must be one of {SPAWN_MODES}, got {spawn!r}")
        if agents is None:
            from .provisioning import agent as provisioning

            agents = [provisioning]
        self.agents = list(by_name(list(agents)).values())
        self.agent_addresses = list(agent_addresses or [])
        self.url = url
        self.settings = settings
        self.spawn = spawn
        self.worker_env = worker_env
        self.owner = owner_token()
        self.children: dict[int, Child] = {}
        self.stopping = False
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)
        self.conn = db.connect(url, application_name="agent_runtime.supervisor")
        db.ensure_schema(self.conn)
        self.journal = Journal(self.conn)
        self.backoff = settings.run_backoff_rule()
        tls_context()  # built once here, inherited by every forked worker

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

    def reap(self) -> list[Child]:
        exited = [c for c in list(self.children.values()) if c.poll() is not None]
        for child in exited:
            del self.children[child.pid]
            code = child.exit_code
            log.info("worker-exited run=%s code=%s", child.lease.run_id, code)
            if code is not None and code != EXIT_DONE:
                try:
                    self._after_exit(child.lease, code)
                except DatabaseError as exc:  # the lease will run out by itself
                    log.warning("release-failed run=%s error=%r", child.lease.run_id, str(exc))
        return exited

    def _after_exit(self, lease: Lease, code: int) -> None:
        """Free the run of a worker that died holding it, and log when it may go again.

        Our own child is dead for certain: its lease need not run out first. After a first
        death since the last progress the run goes again at once (a one-off: a deploy, an
        OOM kill; or our own SIGTERM when stopping); deaths in a row back off like resumable
        errors, so a run that kills its worker every time does not spin. A worker that
        stopped cleanly released the run with its own reason and backoff already.
        """
        run = self.journal.get_run(lease.run_id)
        if run is None:
            return
        if run.status == "running" and run.owner is not None and run.generation == lease.generation:
            died = code == EXIT_CRASHED or code < 0
            if died:  # a worker we stopped ourselves (SIGTERM) did nothing wrong either
                again = run.attempts > 1 and not self.stopping
                delay = self.backoff.delay(run.attempts - 1) if again else 0.0
            else:
                delay = self.backoff.delay(run.attempts)
            reason = None if died else f"the worker exited with code {code} (see its log)"
            params = {"run": lease.run_id, "generation": lease.generation, "delay": delay}
            db.run(self.conn, "expire_lease_of", {**params, "reason": reason})
            run = self.journal.get_run(lease.run_id)
        if run is not None and run.backing_off and run.lease_expires_at is not None:
            log.info(
                "backoff run=%s attempt=%d until=%s",
                run.id,
                max(run.attempts, 1),  # 0: this claim made progress, then stopped: the first
                run.lease_expires_at.isoformat(timespec="milliseconds"),
            )

    def sweep(self) -> list[Child]:
        """Give up on exhausted runs, then claim and start what capacity allows."""
        s = self.settings
        limits = {"max_attempts": s.max_attempts, "give_up_after": s.give_up_after}
        for row in db.run(self.conn, "give_up_exhausted", limits):
            log.warning("gave-up run=%s reason=%r", row["id"], row["failure"])
        free = self.settings.max_workers - len(self.children)
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
            lease = Lease(run_id=row["id"], owner=row["owner"], generation=row["generation"])
            if not self._startable(lease):
                continue
            child = self._start(lease)
            self.children[child.pid] = child
            log.info("resuming run=%s pid=%d", lease.run_id, child.pid)
            started.append(child)
        return started

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

    def _start(self, lease: Lease) -> Child:
        if self.spawn == "exec":
            cmd = [
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
                *[arg for address in self.agent_addresses for arg in ("--agent", address)],
            ]
            env = dict(self.worker_env if self.worker_env is not None else os.environ)
            env["DATABASE_URL"] = self.url
            env.setdefault("CLOUD_URL", self.settings.cloud_url)
            env.setdefault("MODEL_URL", self.settings.model_url)
            env["LEASE"] = str(self.settings.lease)
            env["HEARTBEAT"] = str(self.settings.heartbeat)
            env["RUN_BACKOFF"] = str(self.settings.run_backoff)
            env["RUN_BACKOFF_CAP"] = str(self.settings.run_backoff_cap)
            popen = subprocess.Popen(cmd, env=env)
            return Child(lease=lease, pid=popen.pid, popen=popen)
        for handler in logging.getLogger().handlers:
            handler.flush()
        pid = os.fork()
        if pid == 0:  # the child: never return into the supervisor's loop
            code = EXIT_SOFTWARE
            try:
                signal.set_wakeup_fd(-1)
                for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGCHLD):
                    signal.signal(sig, signal.SIG_DFL)
                code = _run_forked_worker(self.settings, self.url, lease, self.agents)
            finally:
                for handler in logging.getLogger().handlers:
                    handler.flush()
                os._exit(code)
        return Child(lease=lease, pid=pid)

    # -- the loop ------------------------------------------------------------------------

    def wait(self, timeout: float) -> None:
        """Sleep until ``timeout`` passes, a signal arrives, or a child exits."""
        if self.stopping:
            return
        ready, _, _ = select.select([self._wake_r], [], [], timeout)
        if ready:
            try:
                while os.read(self._wake_r, 512):
                    pass
            except BlockingIOError:
                pass

    def serve(self, *, once: bool = False) -> int:
        s = self.settings
        log.info(
            "supervisor lease=%s poll=%s heartbeat=%s max_workers=%d max_attempts=%d "
            "give_up_after=%s run_backoff=%s run_backoff_cap=%s",
            s.lease,
            s.poll,
            s.heartbeat,
            s.max_workers,
            s.max_attempts,
            s.give_up_after,
            s.run_backoff,
            s.run_backoff_cap,
        )
        try:
            while not self.stopping:
                try:
                    self.reap()
                    self.sweep()
                except DatabaseError as exc:  # keep supervising; leases settle the rest
                    log.warning("supervisor-db-error error=%r", str(exc))
                    self._reconnect()
                if once and not self.children:
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
        """Run until no run is claimable and no worker is left (tests and benchmarks)."""
        self._watch_children()
        while True:
            self.reap()
            started = self.sweep()
            if not started and not self.children:
                return
            self.wait(self.settings.poll)

    def shutdown(self) -> None:
        """Stop workers and hand their runs back at once, so nothing waits on a lease."""
        for child in self.children.values():
            with contextlib.suppress(ProcessLookupError):
                os.kill(child.pid, signal.SIGTERM)
        deadline = STOP_GRACE
        while self.children and deadline > 0:
            self.reap()
            if self.children:
                self.wait(0.05)
                deadline -= 0.05
        for child in list(self.children.values()):
            with contextlib.suppress(ProcessLookupError):
                os.kill(child.pid, signal.SIGKILL)
        while self.children:
            self.reap()
            self.wait(0.01)
        log.info("supervisor-stopped")
        if threading.current_thread() is threading.main_thread():
            signal.set_wakeup_fd(-1)
        self.conn.close()
        os.close(self._wake_r)
        os.close(self._wake_w)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m agent_runtime.supervisor",
        description="Restart agent runs whose worker died (lease expired or process gone).",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {version()}")
    parser.add_argument("--lease", type=float, help=f"seconds (default {config.LEASE})")
    parser.add_argument("--poll", type=float, help=f"seconds (default {config.POLL})")
    parser.add_argument("--heartbeat", type=float, help=f"seconds (default {config.HEARTBEAT})")
    parser.add_argument(
        "--max-workers", type=int, help=f"workers at once (default {config.MAX_WORKERS})"
    )
    parser.add_argument(
        "--max-attempts",
        type=int,
        help="claims without progress before a run may be failed, with --give-up-after "
        f"(default {config.MAX_ATTEMPTS}; env MAX_ATTEMPTS)",
    )
    parser.add_argument(
        "--give-up-after",
        type=float,
        help="seconds without progress before a run may be failed, with --max-attempts "
        f"(default {config.GIVE_UP_AFTER:g}; env GIVE_UP_AFTER)",
    )
    parser.add_argument(
        "--run-backoff",
        type=float,
        help="seconds a run stopped by a resumable error waits before its next claim, "
        f"doubled per attempt (default {config.RUN_BACKOFF:g}; env RUN_BACKOFF)",
    )
    parser.add_argument(
        "--run-backoff-cap",
        type=float,
        help=f"seconds that wait grows to at most (default {config.RUN_BACKOFF_CAP:g}; "
        "env RUN_BACKOFF_CAP)",
    )
    parser.add_argument(
        "--spawn",
        choices=SPAWN_MODES,
        default="fork",
        help="fork (fast, default) or exec a fresh interpreter per worker",
    )
    parser.add_argument(
        "--agent",
        action="append",
        metavar="MODULE:ATTR",
        help="an agent whose runs this supervisor takes, as package.module:attribute (give "
        f"several to take several; default {DEFAULT_AGENT})",
    )
    parser.add_argument(
        "--once",
        action="store_true",
        help="exit once nothing is claimable and no worker is running (a run waiting out a "
        "backoff is not claimable)",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    logfmt.install()
    args = build_parser().parse_args(argv)
    try:
        settings = config.from_env(
            lease=args.lease,
            poll=args.poll,
            heartbeat=args.heartbeat,
            max_workers=args.max_workers,
            max_attempts=args.max_attempts,
            give_up_after=args.give_up_after,
            run_backoff=args.run_backoff,
            run_backoff_cap=args.run_backoff_cap,
        )
        addresses = args.agent or [DEFAULT_AGENT]
        agents = agents_of(addresses)  # a wrong --agent is refused, named, before a claim
        supervisor = Supervisor(
            database_url(settings),
            settings,
            spawn=args.spawn,
            agents=agents,
            agent_addresses=addresses,
        )
    except AgentRuntimeError as exc:
        log.error("%s error=%r", type(exc).__name__, str(exc))
        return exc.exit_code
    supervisor.install_signals()
    return supervisor.serve(once=args.once)


if __name__ == "__main__":
    sys.exit(main())
