"""Workers the schedule runner drives gate by gate: a thread, or a real process.

Every crash point of the runtime is a *gate*: the worker reports ``(point, seq)``
and waits for one word back -- ``go`` (carry on) or ``crash`` (die right here).
While a worker waits at a gate nothing else of it runs, so the runner decides
every interleaving and a schedule replays the same way every time. While it waits,
the runner may also renew its lease through the worker's own heartbeat
(:meth:`Pilot.beat`): the production renewal, at a moment the schedule chose.

- :class:`ThreadPilot` runs ``Worker.run`` in a thread against in-process mocks;
  ``crash`` raises :class:`~agent_runtime.crash.InjectedCrash` (a
  ``BaseException``, as in the runtime's own in-process tests).
- :class:`~properties.process_pilot.ProcessPilot` runs it in a real process.
"""

from __future__ import annotations

import contextlib
import logging
import os
import queue
import subprocess
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final, Literal

import httpx
import psycopg
from psycopg.rows import dict_row

from agent_runtime.config import Settings
from agent_runtime.crash import CrashPlan, InjectedCrash
from agent_runtime.hostid import host_identity
from agent_runtime.loop.worker import Worker
from agent_runtime.store import db
from agent_runtime.store.records import Lease, RunTask

from . import sqlfile, variants
from .agents import DEFAULT_KIND, suite_agents

Action = Literal["go", "crash", "kill"]
MESSAGE_TIMEOUT: Final = 60.0  # seconds a worker may take to reach its next gate
CRASHED: Final = "crashed"  # exit kind of a worker we killed at a gate
DONE: Final = "done"  # exit kind of a worker whose run() returned
ABANDON_WAIT: Final = 10.0  # seconds cleanup waits for an in-process worker to stop

log = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True)
class GatePlan(CrashPlan):
    """A crash plan that hands every point to ``hook`` instead of matching one."""

    hook: Callable[[str, int], None]

    def reached(self, point: str, seq: int) -> None:
        self.hook(point, seq)


@dataclass(frozen=True, kw_only=True)
class Gate:
    point: str
    seq: int


@dataclass(frozen=True, kw_only=True)
class Exit:
    kind: str  # DONE, CRASHED, or the exception's class name
    detail: str = ""


Message = Gate | Exit

# What the runner does at a gate while a drive lasts: its bookkeeping, then the word.
OnGate = Callable[[Gate], Literal["go", "pause", "crash", "kill"]]


@dataclass(frozen=True, kw_only=True)
class Stop:
    """Where one drive (:meth:`Pilot.drive`) left the worker.

    ``message`` is the worker's :class:`Exit`, or the gate it waits at; ``action`` what the
    runner's ``on_gate`` said there (``go``: the drive ran out of gates); ``error`` what
    ``on_gate`` raised there, if it raised."""

    message: Message
    action: str | None = None
    error: BaseException | None = None


@dataclass(frozen=True, kw_only=True)
class Start:
    """How a pilot's worker enters its run (the three ways the runtime has)."""

    run_id: str
    label: str  # w1, w2, ... in the order the schedule started them
    takeover: bool = False  # restart: take a live lease over (the caller says it is dead)
    lease: Lease | None = None  # supervisor: a lease claimed for this worker
    task: RunTask | None = None  # and the run's agent and input, as that claim read them
    kind: str = DEFAULT_KIND  # the run's agent (properties.agents), should it create it

    def to_json(self) -> dict[str, Any]:
        lease = self.lease
        return {
            "run_id": self.run_id,
            "label": self.label,
            "takeover": self.takeover,
            "kind": self.kind,
            "lease": None
            if lease is None
            else {"run_id": lease.run_id, "owner": lease.owner, "generation": lease.generation},
            "task": None
            if self.task is None
            else {"agent": self.task.agent, "input": self.task.input},
        }

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> Start:
        lease = obj.get("lease")
        return cls(
            run_id=obj["run_id"],
            label=obj["label"],
            takeover=bool(obj["takeover"]),
            lease=None if lease is None else Lease(**lease),
            task=RunTask(**obj["task"]) if obj.get("task") else None,
            kind=obj.get("kind", DEFAULT_KIND),
        )


def owner_of(label: str, pid: int | None = None) -> str:
    """``host:pid:label``: the runtime's owner-token shape, with a readable nonce."""
    return f"{host_identity()}:{pid or os.getpid()}:{label}"


def build_worker(
    variant: variants.Variant,
    conn: db.Connection,
    settings: Settings,
    *,
    owner: str,
    hook: Callable[[str, int], None],
    support_url: str,
    transports: dict[str, httpx.BaseTransport] | None = None,
    sleep: Callable[[float], None] = time.sleep,
    heartbeat_connect: Callable[[], db.Connection],
) -> Worker:
    """A worker of the variant's kind with every agent of the suite (``transports``: the
    in-process remotes by name; none: the URLs in ``settings`` and ``support_url``)."""
    return variant.worker.build(
        variant.journal(conn),
        settings,
        agents=list(suite_agents(support_url).values()),
        transports=transports,
        sleep=sleep,
        crash=GatePlan(hook=hook),
        owner=owner,
        heartbeat_connect=heartbeat_connect,  # no thread: the runner says when it beats
        rand=no_jitter,  # every wait its full length: both runners see the same backoffs
    )


def no_jitter() -> float:
    """The jitter source of the suite's workers: none, so that schedules replay exactly."""
    return 0.0


@dataclass(frozen=True, kw_only=True)
class Beat:
    """What one renewal through the worker's own heartbeat did."""

    present: bool  # False: the worker holds no lease (no heartbeat) right now
    expires: datetime | None = None  # the lease's new expiry; None: the renewal failed
    lost: bool = False  # the heartbeat found the run taken over: the worker is fenced

    def to_json(self) -> dict[str, Any]:
        return {
            "present": self.present,
            "expires": None if self.expires is None else self.expires.isoformat(),
            "lost": self.lost,
        }

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> Beat:
        expires = obj.get("expires")
        return cls(
            present=bool(obj["present"]),
            expires=None if expires is None else datetime.fromisoformat(expires),
            lost=bool(obj["lost"]),
        )


def beat(worker: Worker) -> Beat:
    """Renew ``worker``'s lease once, through the runtime's own heartbeat."""
    heartbeat = worker.heartbeat
    if heartbeat is None:
        return Beat(present=False)
    expires = heartbeat.beat()
    return Beat(present=True, expires=expires, lost=heartbeat.lost.is_set())


def enter(worker: Worker, start: Start, support_url: str) -> None:
    worker.run(
        start.run_id,
        agent=suite_agents(support_url)[start.kind].name,
        lease=start.lease,
        create=start.lease is None,
        takeover=start.takeover,
        task=start.task,
    )


class Pilot(ABC):
    """One worker, paused at a gate whenever the runner is not letting it go."""

    start: Start
    owner: str
    backend_pid: int | None

    @abstractmethod
    def next(self, timeout: float = MESSAGE_TIMEOUT) -> Message:
        """Block until the worker reaches a gate or ends."""

    @abstractmethod
    def reply(self, action: Action) -> None:
        """Answer the gate the worker waits at."""

    def drive(self, on_gate: OnGate, gates: int, *, resume: bool) -> Stop:
        """Let the worker run (``resume``: answer ``go`` at the gate it waits at) while
        ``on_gate`` says ``go``, for at most ``gates`` gates; where it stopped.

        Here, one message per gate in the caller's thread; a pilot may run ``on_gate`` in the
        worker's own thread instead (the caller waits meanwhile, so it is the same order)."""
        if resume:
            self.reply("go")
        for passed in range(1, gates + 1):
            message = self.next()
            if isinstance(message, Exit):
                return Stop(message=message)
            action = on_gate(message)
            if action != "go" or passed == gates:
                return Stop(message=message, action=action)
            self.reply("go")
        raise ValueError(f"a drive needs at least one gate, not {gates}")

    @abstractmethod
    def beat(self) -> Beat:
        """While the worker waits at a gate: renew its lease once, as its heartbeat would."""

    def freeze(self) -> None:  # noqa: B027 -- a no-op unless the worker is a process
        """Stop the worker's whole process (a stall); no-op where that means nothing."""

    def thaw(self) -> None:  # noqa: B027
        """Undo :meth:`freeze`."""

    @abstractmethod
    def abandon(self) -> None:
        """Make sure the worker is gone (cleanup); safe to call twice."""

    @property
    def gone(self) -> bool:
        """Whether the process its owner token names is provably gone (False: alive, or
        not known here)."""
        return False

    @property
    def leaked(self) -> str:
        """What the worker, once ended, left open that it should have closed ("": nothing,
        or not known here: a process's connections die with it)."""
        return ""


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
            self.gone = True
        if reap:
            self._proc.wait()


# -- in-process ----------------------------------------------------------------------------


class ConnectionPool:
    """Connections of ended in-process workers, handed to the next worker.

    A worker only ever ends between two autocommit statements (at a gate, or after
    its last write), so a healthy connection it leaves behind, its session settings reset,
    carries no state a fresh one would not; reusing it saves a connect (about 4 ms) per
    worker. A
    connection the schedule terminated, or one that broke, is closed instead.
    """

    def __init__(self, url: str) -> None:
        self.url = url
        self._spare: list[db.Connection] = []
        self._lock = threading.Lock()
        self._heartbeats: _SharedConnection | None = None
        self._retired: list[_SharedConnection] = []  # heartbeats' connections before a crash

    def take(self, label: str) -> db.Connection:
        with self._lock:
            if self._spare:
                return self._spare.pop()
        return db.connect(self.url, application_name="properties.worker")

    def give_back(self, conn: db.Connection, *, healthy: bool) -> None:
        if healthy and not conn.closed and not conn.broken:
            try:  # a setting the worker left on its session must not reach the next one
                sqlfile.rows(conn, "reset_session")
            except Exception:
                with contextlib.suppress(Exception):
                    conn.close()
                return
            with self._lock:
                self._spare.append(conn)
                return
        with contextlib.suppress(Exception):
            conn.close()

    def close(self) -> None:
        """Close every connection kept here: the spare ones and the heartbeats'."""
        self.drop()
        with self._lock:
            retired, self._retired = self._retired, []
        for conn in retired:
            conn.really_close()

    def drop(self) -> None:
        """After a database crash: close the spare connections, and give the heartbeats a
        new one from now on. Heartbeats still holding the old one find it dead at their next
        beat, as a worker process's own heartbeat connection would."""
        with self._lock:
            spare, self._spare = self._spare, []
            if self._heartbeats is not None:
                self._retired.append(self._heartbeats)
            self._heartbeats = None
        for conn in spare:
            with contextlib.suppress(Exception):
                conn.close()

    def heartbeat_connect(self) -> db.Connection:
        """The connection every in-process heartbeat renews on.

        Beats run one at a time in the runner's thread, so one connection serves them all:
        the renewal is the runtime's own statement either way, and a connect per worker
        would cost more than its steps. A heartbeat's ``close()`` leaves it open.
        """
        with self._lock:
            shared = self._heartbeats
            if shared is None or shared.closed or shared.broken:
                shared = self._heartbeats = _SharedConnection.connect(
                    self.url,
                    autocommit=True,
                    row_factory=dict_row,
                    prepare_threshold=0,
                    application_name="properties.heartbeat",
                )
        return shared


# The in-process worker whose thread (its own, or the runner's during its beat) runs now:
# a heartbeat's close() of the shared connection is told to it.
_current = threading.local()


class _SharedConnection(psycopg.Connection[db.Row]):
    """A connection its users cannot close; its owner closes it with :meth:`really_close`.
    A user's close() is noted on the in-process worker that made it (a heartbeat that
    never closes its connection leaks one per run in production)."""

    def close(self) -> None:
        pilot = getattr(_current, "pilot", None)
        if isinstance(pilot, ThreadPilot):
            pilot.heartbeat_open = False

    def really_close(self) -> None:
        with contextlib.suppress(Exception):
            super().close()


class ThreadPilot(Pilot):
    """``Worker.run`` in a daemon thread, over a database connection of its own."""

    def __init__(
        self,
        start: Start,
        *,
        pool: ConnectionPool,
        settings: Settings,
        variant: variants.Variant,
        transports: dict[str, httpx.BaseTransport],
        support_url: str,
    ) -> None:
        self.start = start
        self._support_url = support_url
        self.body = Body()
        self._killed = False  # the schedule killed it (SIGKILL): its body stays a zombie
        # on a claimed lease it adopts it, as in the pool
        self.owner = owner_of(start.label, self.body.pid)
        # SimpleQueue: a C handoff, without queue.Queue's Python-level Condition per put/get
        self._inbox: queue.SimpleQueue[Message | Stop] = queue.SimpleQueue()
        self._outbox: queue.SimpleQueue[Action] = queue.SimpleQueue()
        self._pool = pool
        self._conn = pool.take(start.label)
        self.backend_pid = self._conn.info.backend_pid
        self.dropped = False  # set by the runner when it terminates this backend
        self._heartbeat: db.Connection | None = None  # the last one its heartbeat made
        self.heartbeat_open = False  # ... and not closed since
        self._worker = build_worker(
            variant,
            self._conn,
            settings,
            owner=self.owner,
            hook=self._gate,
            support_url=support_url,
            transports=transports,
            sleep=lambda seconds: None,
            heartbeat_connect=self._heartbeat_connect,
        )
        self._ended = False
        self._steer: _Steer | None = None  # the drive under way, run at the worker's gates
        self._thread = threading.Thread(
            target=self._body, name=f"properties-{start.label}", daemon=True
        )
        self._thread.start()

    def _heartbeat_connect(self) -> db.Connection:
        conn = self._heartbeat = self._pool.heartbeat_connect()
        self.heartbeat_open = True
        return conn

    @property
    def leaked(self) -> str:
        """What the ended worker left open: its heartbeat's connection, if it never closed
        it while the connection still worked."""
        conn = self._heartbeat
        if self.heartbeat_open and conn is not None and not (conn.closed or conn.broken):
            return "its heartbeat's database connection"
        return ""

    def _gate(self, point: str, seq: int) -> None:
        gate = Gate(point=point, seq=seq)
        steer = self._steer
        if steer is None:
            self._inbox.put(gate)
        else:
            # A drive is under way and the runner waits for its end: judge the gate here,
            # in this thread, instead of two thread switches per gate passed.
            try:
                action = steer.on_gate(gate)
            except BaseException as exc:  # the runner's to raise, not the worker's
                self._steer = None
                self._inbox.put(Stop(message=gate, error=exc))
            else:
                steer.passed += 1
                if action == "go" and steer.passed < steer.gates:
                    return
                self._steer = None
                self._inbox.put(Stop(message=gate, action=action))
        if self._outbox.get() != "go":
            raise InjectedCrash(point, seq)

    def _body(self) -> None:
        message: Message = Exit(kind=DONE)
        _current.pilot = self
        try:
            enter(self._worker, self.start, self._support_url)
        except InjectedCrash:
            message = Exit(kind=CRASHED)
        except BaseException as exc:  # everything else is evidence: report it
            message = Exit(kind=type(exc).__name__, detail=str(exc)[:500])
        finally:
            with contextlib.suppress(Exception):
                self._worker.close_clients()
            self._pool.give_back(self._conn, healthy=not self.dropped)
            self.body.end(reap=not self._killed)
            self._inbox.put(message)

    def next(self, timeout: float = MESSAGE_TIMEOUT) -> Message:
        message = self._receive(timeout)
        if isinstance(message, Stop):
            raise RuntimeError(f"worker {self.start.label} sent {message} outside a drive")
        return message

    def drive(self, on_gate: OnGate, gates: int, *, resume: bool) -> Stop:
        if gates < 1:
            raise ValueError(f"a drive needs at least one gate, not {gates}")
        steer = self._steer = _Steer(on_gate=on_gate, gates=gates)
        if resume:
            self.reply("go")
        try:
            while True:
                message = self._receive(MESSAGE_TIMEOUT)
                if isinstance(message, Stop):
                    return message
                if isinstance(message, Exit):
                    return Stop(message=message)
                # a gate reached before the drive was set up (a new worker's first): judged
                # here, as the base class would
                steer.passed += 1
                action = on_gate(message)
                if action != "go" or steer.passed >= gates:
                    return Stop(message=message, action=action)
                self.reply("go")
        finally:
            self._steer = None

    def _receive(self, timeout: float) -> Message | Stop:
        try:
            message = self._inbox.get(timeout=timeout)
        except queue.Empty:
            raise TimeoutError(
                f"worker {self.start.label} on {self.start.run_id} reached no gate in {timeout}s"
            ) from None
        if isinstance(message, Exit):
            self._ended = True
            self._thread.join(timeout=timeout)
        return message

    def reply(self, action: Action) -> None:
        self._killed = self._killed or action == "kill"
        self._outbox.put("go" if action == "go" else "crash")

    @property
    def gone(self) -> bool:
        return self.body.gone

    def beat(self) -> Beat:
        _current.pilot = self
        try:
            return beat(self._worker)  # the worker's thread waits at a gate meanwhile
        finally:
            _current.pilot = None

    def abandon(self) -> None:
        if self._ended:
            self.body.end(reap=True)
            return
        deadline = time.monotonic() + ABANDON_WAIT
        while self._thread.is_alive() and time.monotonic() < deadline:
            self._outbox.put("crash")  # answers the gate it waits at, if it waits at one
            self._thread.join(timeout=0.05)
        if self._thread.is_alive():  # stuck outside a gate: a daemon thread, left behind
            log.warning("worker %s did not stop within %ss", self.start.label, ABANDON_WAIT)
        self._ended = True
        self.body.end(reap=True)


@dataclass(eq=False, kw_only=True)
class _Steer:
    """A drive a :class:`ThreadPilot`'s worker runs at its own gates."""

    on_gate: OnGate
    gates: int
    passed: int = 0
