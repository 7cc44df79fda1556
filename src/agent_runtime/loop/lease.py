"""Owner tokens, proof that an owner is dead, the heartbeat that keeps a lease, and the
wait that ends by asking whether the lease is still held.

Lease expiry is decided only by the database clock ``cr_now()`` (see schema.sql):
the heartbeat's own period is real time, but whether a lease has run out is a
comparison made in SQL against the one clock tests can move.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import threading
import uuid
from collections.abc import Callable
from datetime import datetime

from agent_runtime.config import Settings
from agent_runtime.errors import AgentRuntimeError, LeaseLost
from agent_runtime.hostid import host_identity
from agent_runtime.store import db
from agent_runtime.store.journal import Journal
from agent_runtime.store.records import Lease

log = logging.getLogger(__name__)


def owner_token(pid: int | None = None) -> str:
    """``host:pid:nonce``: unique per worker, and says where to look for its process (the
    host as :func:`host_identity` names it)."""
    return f"{host_identity()}:{pid or os.getpid()}:{uuid.uuid4().hex[:8]}"


def owner_is_dead(owner: str | None) -> bool:
    """True only when the owner provably died: it ran on this host (the same
    :func:`host_identity`) and its pid is gone. An owner on another host is never proved
    dead from here: its lease has to run out. A supervisor's claim its worker has not yet
    adopted names the supervisor, the run after it (``host:pid:nonce:run``)."""
    if not owner:
        return False
    parts = owner.split(":")
    if len(parts) < 3 or parts[0] != host_identity() or not parts[1].isdigit():
        return False
    pid = int(parts[1])
    if pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return _is_zombie(pid)


def _is_zombie(pid: int) -> bool:
    """A killed process nobody reaped still answers kill(pid, 0); it is dead all the same."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return False


class Heartbeat:
    """Keeps a lease alive: :meth:`beat` renews it once, on a connection of its own.

    In production :meth:`start` runs a thread that beats every ``interval`` seconds while
    the worker's main thread is blocked on the model or a tool. Tests and the property suite
    call :meth:`beat` themselves instead, so every renewal runs this same code at a moment
    they choose. A renewal that finds the run taken over (``LeaseLost``) sets :attr:`lost`
    for good; the worker checks it before every remote call. A database error only costs
    that beat: the connection is dropped and made again at the next one.
    """

    def __init__(
        self,
        lease: Lease,
        *,
        connect: Callable[[], db.Connection],
        lease_seconds: float,
        interval: float,
        journal: Callable[[db.Connection], Journal] = Journal,
    ) -> None:
        self.lease = lease
        self._connect = connect
        self._journal = journal
        self._lease_seconds = lease_seconds
        self._interval = interval
        self._conn: db.Connection | None = None
        self._stop = threading.Event()
        self.lost = threading.Event()
        self._thread: threading.Thread | None = None

    def beat(self) -> datetime | None:
        """Renew the lease once: its new expiry, or None if this renewal failed."""
        if self.lost.is_set():
            return None
        try:
            if self._conn is None or self._conn.closed:
                self._conn = self._connect()
            return self._journal(self._conn).renew(self.lease, self._lease_seconds)
        except LeaseLost as exc:
            log.warning("lease-lost run=%s reason=%r", self.lease.run_id, str(exc))
            self.lost.set()
            return None
        except AgentRuntimeError as exc:
            log.warning("heartbeat-failed run=%s error=%r", self.lease.run_id, str(exc))
            self._disconnect()
            return None

    def start(self) -> Heartbeat:
        """Beat every ``interval`` seconds in a daemon thread until stopped or lost."""
        self._thread = threading.Thread(
            target=self._loop, name=f"heartbeat-{self.lease.run_id}", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        thread = self._thread
        if thread is not None and thread.is_alive() and thread is not threading.current_thread():
            thread.join(timeout=5)
        if thread is None or not thread.is_alive():
            self._disconnect()

    def _loop(self) -> None:
        try:
            while not self._stop.wait(self._interval) and not self.lost.is_set():
                self.beat()
        finally:
            self._disconnect()

    def _disconnect(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.close()


class OwnedWait:
    """How a tool's client waits before it sends again, on a worker: ``sleep``, then, while
    the worker acts for a run (:attr:`lease`), ``guard`` (the heartbeat's flag) and a read
    of the journal, so a takeover or an operator's cancel during the wait raises
    ``LeaseLost`` instead of letting the re-send go out. A client's own retries run inside
    one attempt of a call, where the worker's actor cannot look (the cloud client's do)."""

    def __init__(
        self, sleep: Callable[[float], None], journal: Journal, guard: Callable[[Lease], None]
    ) -> None:
        self._sleep = sleep
        self._journal = journal
        self._guard = guard
        self.lease: Lease | None = None  # set while the worker holds a run

    def __call__(self, seconds: float) -> None:
        self._sleep(seconds)
        lease = self.lease
        if lease is not None:
            self._guard(lease)
            self._journal.check_owner(lease, "a tool's retry after a wait")


def make_heartbeat(
    lease: Lease,
    settings: Settings,
    *,
    url: str | None,
    connect: Callable[[], db.Connection] | None,
    journal: Callable[[db.Connection], Journal] = Journal,
) -> Heartbeat | None:
    """The renewal of ``lease``: a started thread on connections to ``url``; with
    ``connect`` instead, a heartbeat its caller beats (tests, the property suite); with
    neither, none (a test that moves the clock itself)."""
    if url is not None:
        connect = functools.partial(db.connect, url, application_name="agent_runtime.heartbeat")
    if connect is None:
        return None
    heartbeat = Heartbeat(
        lease,
        connect=connect,
        lease_seconds=settings.lease,
        interval=settings.heartbeat,
        journal=journal,
    )
    return heartbeat.start() if url is not None else heartbeat
