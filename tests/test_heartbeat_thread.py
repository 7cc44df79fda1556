"""The heartbeat's own thread, as production runs it (``make_heartbeat`` with a URL): it
beats on its own until stopped, then lets its connection go.

The property suite beats every worker itself at moments a schedule chooses, so it never
runs this thread; the mutation driver kills the thread's mutants here instead
(``properties/mutation/tiers.py``). Nothing waits for a lease to expire: the clock is
frozen and moved by hand, and each move is caught up by a later beat.
"""

from __future__ import annotations

import functools
import subprocess
import sys
import threading
from datetime import datetime, timedelta
from typing import Any

import pytest

from agent_runtime.config import Settings
from agent_runtime.loop.lease import make_heartbeat
from agent_runtime.store import clock
from agent_runtime.store.journal import Journal
from agent_runtime.store.records import Lease

from .fix_supervisor import wait_for

LEASE = 12.0
RUN = "hb-thread"


def _renewed_to(journal: Journal, due: datetime) -> bool:
    return journal.require_run(RUN).lease_expires_at == due


def _heartbeat_backends(conn: Any) -> int:
    row = conn.execute(
        "SELECT count(*) AS n FROM pg_stat_activity "
        "WHERE application_name = 'agent_runtime.heartbeat' AND pid <> pg_backend_pid()"
    ).fetchone()
    return int(row["n"])


@pytest.mark.usefixtures("frozen_clock")
def test_a_started_heartbeat_beats_until_stopped_then_lets_its_connection_go(
    conn: Any, database_url: str
) -> None:
    journal = Journal(conn)
    journal.create_run(RUN)
    lease = journal.claim(RUN, "w1", LEASE)
    assert lease is not None
    heartbeat = make_heartbeat(
        lease, Settings(lease=LEASE, heartbeat=0.02), url=database_url, connect=None
    )
    assert heartbeat is not None  # a URL: a thread of its own, started
    try:
        for _ in range(3):  # it beats again and again, not once
            now = clock.advance(conn, 1.0)
            due = now + timedelta(seconds=LEASE)
            wait_for("a beat after the clock moved", functools.partial(_renewed_to, journal, due))
        assert _heartbeat_backends(conn) == 1
    finally:
        heartbeat.stop()
    assert f"heartbeat-{RUN}" not in {t.name for t in threading.enumerate()}
    wait_for("the heartbeat's connection to close", lambda: _heartbeat_backends(conn) == 0)
    assert not heartbeat.lost.is_set()


def test_without_a_url_or_a_connect_there_is_no_heartbeat() -> None:
    lease = Lease(run_id=RUN, owner="w1", generation=1)
    assert make_heartbeat(lease, Settings(), url=None, connect=None) is None


def test_a_heartbeat_left_running_does_not_keep_its_process_alive(
    conn: Any, database_url: str
) -> None:
    """A worker process that ends without stopping its heartbeat (a crash path, an
    ``os._exit`` aside) still exits: the thread is a daemon."""
    journal = Journal(conn)
    journal.create_run("hb-daemon")
    lease = journal.claim("hb-daemon", "w1", LEASE)
    assert lease is not None
    script = (
        "import sys\n"
        "from agent_runtime.config import Settings\n"
        "from agent_runtime.loop.lease import make_heartbeat\n"
        "from agent_runtime.store.records import Lease\n"
        f"lease = Lease(run_id='hb-daemon', owner='w1', generation={lease.generation})\n"
        "beat = make_heartbeat(lease, Settings(lease=12.0, heartbeat=0.05), url=sys.argv[1],"
        " connect=None)\n"
        "print('beating', flush=True)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, database_url], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "beating\n"
