"""A silent worker's diagnosis (properties/silence.py): what the runner's TimeoutError says."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

from agent_runtime.store import db

from .server import SuiteDatabase
from .silence import describe


def test_a_stopped_worker_waiting_on_a_row_lock_is_described_as_such(
    suite_database: SuiteDatabase,
) -> None:
    url = suite_database.url
    with db.connect(url, application_name="properties.holder") as holder:
        holder.execute("CREATE TABLE IF NOT EXISTS silence_probe (id int PRIMARY KEY)")
        holder.execute("INSERT INTO silence_probe VALUES (1) ON CONFLICT DO NOTHING")
        holder.execute("BEGIN")  # an autocommit connection: the lock is held till ROLLBACK
        holder.execute("SELECT id FROM silence_probe WHERE id = 1 FOR UPDATE")
        waiter = subprocess.Popen(
            [sys.executable, "-c",
             "import sys, psycopg\n"
             "c = psycopg.connect(sys.argv[1], application_name='properties.waiter')\n"
             "c.execute('SELECT id FROM silence_probe WHERE id = 1 FOR UPDATE')\n",
             url],
        )  # fmt: skip
        try:
            said = ""
            for _ in range(200):  # until the waiter's session is seen waiting on the lock
                said = describe(waiter.pid, url)
                if "properties.waiter" in said and "Lock:" in said:
                    break
                holder.execute("SELECT pg_sleep(0.05)")
            assert "properties.waiter" in said and "Lock:transactionid" in said, said
            assert "state='S (sleeping)'" in said, said
            os.kill(waiter.pid, signal.SIGSTOP)
            os.waitpid(waiter.pid, os.WUNTRACED)  # until the kernel has it stopped
            assert "state='T (stopped)'" in describe(waiter.pid, url)
        finally:
            waiter.kill()
            waiter.wait()
            holder.execute("ROLLBACK")
            holder.execute("DROP TABLE silence_probe")


def test_a_database_that_cannot_be_read_does_not_hide_the_silence() -> None:
    said = describe(os.getpid(), "postgresql://nobody@127.0.0.1:1/none?connect_timeout=1")
    assert "state='R (running)'" in said
    assert "sessions: unreadable (" in said
