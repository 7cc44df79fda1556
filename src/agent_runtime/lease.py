"""Owner tokens, proof that an owner is dead, and the heartbeat that keeps a lease.

Lease expiry is decided only by the database clock ``cr_now()`` (see schema.sql):
the heartbeat's own period is real time, but whether a lease has run out is a
comparison made in SQL against the one clock tests can move.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import uuid

from . import db
from .errors import AgentRuntimeError, LeaseLost
from .journal import Journal
from .records import Lease

log = logging.getLogger(__name__)


def owner_token(pid: int | None = None) -> str:
    """``host:pid:nonce``: unique per worker, and says where to look for its process."""
    return f"{socket.gethostname()}:{pid or os.getpid()}:{uuid.uuid4().hex[:8]}"


def owner_is_dead(owner: str | None) -> bool:
    """True only when the owner provably died: it ran on this host and its pid is gone."""
    if not owner:
        return False
    parts = owner.split(":")
    if len(parts) < 3 or parts[0] != socket.gethostname() or not parts[1].isdigit():
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
    """Renews a lease every ``interval`` seconds on its own connection, in a thread."""

    def __init__(self, url: str, lease: Lease, *, lease_seconds: float, interval: float) -> None:
        self._url = url
        self._lease = lease
        self._lease_seconds = lease_seconds
        self._interval = interval
        self._stop = threading.Event()
        self.lost = threading.Event()
        self._thread = threading.Thread(
            target=self._loop, name=f"heartbeat-{lease.run_id}", daemon=True
        )

    def start(self) -> Heartbeat:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout=5)

    def _loop(self) -> None:
        conn: db.Connection | None = None
        try:
            while not self._stop.wait(self._interval):
                try:
                    if conn is None or conn.closed:
                        conn = db.connect(self._url, application_name="agent_runtime.heartbeat")
                    Journal(conn).renew(self._lease, self._lease_seconds)
                except LeaseLost as exc:
                    log.warning("lease-lost run=%s reason=%r", self._lease.run_id, str(exc))
                    self.lost.set()
                    return
                except AgentRuntimeError as exc:
                    log.warning("heartbeat-failed run=%s error=%r", self._lease.run_id, str(exc))
                    if conn is not None:
                        conn.close()
                        conn = None
        finally:
            if conn is not None:
                conn.close()
