"""The in-process pilot: ``Worker.run`` in a daemon thread, over a connection of its own.

Its workers share one process, so each gets a :class:`Body` (a process its owner token
names, which dies with it), and the connections of ended workers are handed to the next
(:class:`ConnectionPool`), the heartbeats' shared.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

import httpx
import psycopg
from psycopg.rows import dict_row

from agent_runtime.config import Settings
from agent_runtime.crash import InjectedCrash
from agent_runtime.loop.outcome import Outcome
from agent_runtime.store import db

if TYPE_CHECKING:
    from agent_runtime.loop.lease import Heartbeat

from . import sqlfile, variants, waits
from .pilots import (
    CRASHED,
    DONE,
    MESSAGE_TIMEOUT,
    SIBLING_RUN,
    Action,
    Beat,
    Exit,
    Gate,
    Message,
    OnGate,
    Pilot,
    Start,
    Stop,
    beat,
    build_worker,
    enter,
    owner_of,
)
from .thread_body import Body

ABANDON_WAIT: Final = 10.0  # seconds cleanup waits for an in-process worker to stop
# The period of an in-process worker's real heartbeat thread: one that never comes, so the
# thread never beats on its own (the schedule chooses every beat) but is started, and
# stopped by the worker's own Heartbeat.stop(), as in production.
NEVER: Final = threading.TIMEOUT_MAX  # seconds

log = logging.getLogger(__name__)


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
# ... and the in-process worker each running heartbeat thread (by ident) beats for.
_beating_for: dict[int, ThreadPilot] = {}


class _SharedConnection(psycopg.Connection[db.Row]):
    """A connection its users cannot close; its owner closes it with :meth:`really_close`.
    A user's close() is noted on the in-process worker that made it (a heartbeat that
    never closes its connection leaks one per run in production)."""

    def close(self) -> None:
        pilot = getattr(_current, "pilot", None) or _beating_for.get(threading.get_ident())
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
        self.body = Body(own=start.run_id == SIBLING_RUN)  # a thread of this process
        self._killed = False  # the schedule killed it (SIGKILL): its body stays a zombie
        # on a claimed lease it adopts it, as in the pool
        self.owner = owner_of(start.label, self.body.pid, start.run_id)
        # SimpleQueue: a C handoff, without queue.Queue's Python-level Condition per put/get
        self._inbox: queue.SimpleQueue[Message | Stop] = queue.SimpleQueue()
        self._outbox: queue.SimpleQueue[Action] = queue.SimpleQueue()
        self._pool = pool
        self._conn = pool.take(start.label)
        self.backend_pid = self._conn.info.backend_pid
        self.dropped = False  # set by the runner when it terminates this backend
        self._heartbeat: db.Connection | None = None  # the last one its heartbeat made
        self.heartbeat_open = False  # ... and not closed since
        self.waits = waits.WaitLog()  # every wait it makes, and its tools' attempts
        self.outcome: Outcome | None = None  # what Worker.run returned (outcomes.py)
        self.stopped_with: BaseException | None = None  # what it raised instead (logged.py)
        self._beating: Heartbeat | None = None  # the heartbeat whose thread it started
        self._heartbeat_thread: threading.Thread | None = None
        self._returned_seen = False  # Worker.run returned: its heartbeat was looked at
        self._outlived = False  # its heartbeat's thread still ran when Worker.run returned
        self._worker = build_worker(
            variant,
            self._conn,
            settings,
            owner=self.owner,
            hook=self._gate,
            support_url=support_url,
            transports=transports,
            sleep=waits.WaitSeam(self._gate, self.waits),  # never sleeps: a gate at a retry
            heartbeat_connect=self._heartbeat_connect,
            start=start,
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
        it while the connection still worked; its heartbeat's thread, if it still ran when
        ``Worker.run`` returned (``Heartbeat.stop`` ends it first: no renewal still under
        way, the connection closed), or if it is no daemon (the worker's own thread is one
        the runner may leave behind stuck, as a program embedding a worker may: the
        process must still be able to exit)."""
        thread = self._heartbeat_thread
        if thread is not None and not thread.daemon:
            return "its heartbeat's thread, which is not a daemon: it holds the process at exit"
        if self._outlived:
            return "its heartbeat's thread, still running after the worker returned"
        conn = self._heartbeat
        if self.heartbeat_open and conn is not None and not (conn.closed or conn.broken):
            return "its heartbeat's database connection"
        return ""

    def _start_heartbeat(self) -> None:
        """Run the worker's heartbeat thread, the production one (``Heartbeat.start``), from
        the first gate after the worker made it, with a period that never comes: the
        schedule still chooses every beat (:meth:`beat`), so replay stays exact, while the
        thread's start, and its end in ``Heartbeat.stop`` (the join, the disconnect), run
        for real."""
        heartbeat = self._worker.heartbeat
        if heartbeat is None or heartbeat is self._beating:
            return
        self._beating = heartbeat
        heartbeat._interval = NEVER
        heartbeat.start()
        thread = self._heartbeat_thread = heartbeat._thread
        if thread is not None and thread.ident is not None:
            _beating_for[thread.ident] = self

    def _gate(self, point: str, seq: int) -> None:
        self._start_heartbeat()
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
        waits.bind(self.waits)
        try:
            self.outcome = enter(
                self._worker, self.start, self._support_url, returned=self._returned
            )
        except InjectedCrash:
            message = Exit(kind=CRASHED)
        except BaseException as exc:  # everything else is evidence: report it
            message = Exit(kind=type(exc).__name__, detail=str(exc)[:500])
            self.stopped_with = exc
        finally:
            self._returned()
            with contextlib.suppress(Exception):
                self._worker.close_clients()
            self._pool.give_back(self._conn, healthy=not self.dropped)
            self.body.end(reap=not self._killed)
            self._inbox.put(message)

    def _returned(self) -> None:
        """Worker.run returned or raised (before anything is judged of what it handed back):
        its heartbeat must have stopped."""
        thread = self._heartbeat_thread
        if thread is not None and not self._returned_seen:
            self._returned_seen = True
            self._outlived = thread.is_alive()
            _beating_for.pop(thread.ident or 0, None)

    def next(self, timeout: float = MESSAGE_TIMEOUT) -> Message:
        message = self._receive(timeout)
        if isinstance(message, Stop):
            raise RuntimeError(f"worker {self.start.label} sent {message} outside a drive")
        return message

    def arrived(self) -> bool:
        """Whether the worker reached a gate or ended, and the runner has not heard it yet
        (a look without waiting: the ``race`` event watches a worker inside a statement)."""
        return not self._inbox.empty()

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
