"""A silent worker's diagnosis (properties/silence.py): what the runner's TimeoutError says."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from agent_runtime.store import db

from .server import SuiteDatabase
from .silence import describe, stacks


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
            assert "state='T (stopped)'" not in said, said  # waiting, not stopped (S or R)
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


def test_a_silent_worker_with_a_stack_handler_shows_where_it_waits(tmp_path: Path) -> None:
    log = tmp_path / "workers.log"
    code = (
        "import faulthandler, os, signal, sys, time\n"
        "fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_APPEND)\n"
        "faulthandler.register(signal.SIGUSR1, file=fd, all_threads=True)\n"
        "def stuck_in_a_wait():\n"
        "    print('ready', flush=True)\n"
        "    time.sleep(60)\n"
        "stuck_in_a_wait()\n"
    )
    child = subprocess.Popen([sys.executable, "-c", code, str(log)], stdout=subprocess.PIPE)
    try:
        assert child.stdout is not None and child.stdout.readline() == b"ready\n"
        said = stacks(child.pid, log)
        assert "stuck_in_a_wait" in said, said
        assert child.poll() is None  # asked, not killed
    finally:
        child.kill()
        child.wait()
        assert child.stdout is not None
        child.stdout.close()
    assert stacks(os.getpid(), log) == ""  # no handler: never signalled (it would kill)
