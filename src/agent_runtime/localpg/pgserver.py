"""The server process of a local cluster: its pid file, starting it, waiting for it, stopping it.

:class:`ServerControl` is the half of :class:`agent_runtime.localpg.pgcluster.LocalCluster` that
deals
with the running postmaster; the other half (where the cluster lives, ``initdb``, who may
connect, the lock) is ``pgcluster``. A start clears a stale ``postmaster.pid`` left by a
killed server (waiting for its orphaned backends), writes ``crashresume.conf`` with the port
(``pgconf``), spawns ``postgres`` in its own session as the server account, and polls until it
answers on the port with this data directory (creating the database ``crashresume``). A port
taken by someone else between the choice and the bind is replaced (``PORT_ATTEMPTS``).

Errors: ``ClusterError``, its message says what to do.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Literal

import psycopg
from psycopg import errors
from psycopg.rows import TupleRow

from agent_runtime.localpg import pgauth, pgconf
from agent_runtime.localpg.pgbinaries import ClusterError, ServerAccount, server_account, server_env
from agent_runtime.localpg.pgprocess import (
    HOST,
    POLL_INTERVAL,
    adopt_child,
    alive,
    cwd_of,
    free_port,
    port_free,
    wait_orphans,
)
from agent_runtime.store.queries import query

log = logging.getLogger(__name__)

StopMode = Literal["smart", "fast", "immediate"]

LOG_NAME = "server.log"
START_TIMEOUT = 60.0  # seconds; crash recovery replays WAL before accepting connections
STOP_TIMEOUT = 60.0  # seconds; a fast stop writes a shutdown checkpoint first
ORPHAN_TIMEOUT = 5.0  # seconds for backends of a killed postmaster to notice and exit
CONNECT_TIMEOUT = 2  # seconds; libpq's smallest useful connect_timeout
PORT_ATTEMPTS = 5  # fresh ports tried when the chosen one is taken during start
LOG_TAIL = 2000  # characters of server.log quoted in errors
STOP_SIGNALS = {"smart": signal.SIGTERM, "fast": signal.SIGINT, "immediate": signal.SIGQUIT}
_BIND_FAILURE = "could not create any TCP/IP sockets"


class ServerControl:
    """The running postmaster of ``datadir``; mixed into ``LocalCluster``, which sets the
    attributes declared here."""

    datadir: Path
    passfile: Path
    _port: int | None
    _settings: dict[str, str]
    _source_bindir: Path | None
    _account: ServerAccount | None
    _last_refusal = ""  # why the last probe could not connect, for the timeout's message

    @property
    def account(self) -> ServerAccount:
        """The OS account the server runs as."""
        if self._account is None:
            self._account = server_account()
        return self._account

    @property
    def log_path(self) -> Path:
        return self.datadir / LOG_NAME

    def postmaster_pid(self) -> int | None:
        """The pid of the live postmaster on this data directory, if any."""
        pid, _ = self._read_pidfile()
        return pid if pid is not None and self._is_postmaster(pid) else None

    # -- running state ----------------------------------------------------------------------

    def _read_pidfile(self) -> tuple[int | None, int | None]:
        try:
            lines = (self.datadir / "postmaster.pid").read_text().splitlines()
        except (OSError, UnicodeDecodeError):
            return None, None
        pid = int(lines[0]) if lines and lines[0].strip().isdigit() else None
        port = int(lines[3]) if len(lines) > 3 and lines[3].strip().isdigit() else None
        return pid, port

    def _is_postmaster(self, pid: int) -> bool:
        if not alive(pid):
            return False
        cwd = cwd_of(pid)  # a postmaster and its backends chdir to the data directory
        return cwd is None or cwd == self.datadir.resolve()

    def _running_port(self) -> int | None:
        pid, port = self._read_pidfile()
        if pid is None or port is None or not self._is_postmaster(pid):
            return None
        if self._wait_ready(port, pid=pid, proc=None):
            return port
        return None

    def _probe(self, port: int, *, create_db: bool) -> bool:
        """Connect; True if this data directory's server answered (creating the DB if asked)."""
        try:
            with psycopg.connect(
                pgauth.conninfo(port, self.passfile),
                autocommit=True,
                connect_timeout=CONNECT_TIMEOUT,
            ) as conn:
                row = conn.execute(query("cluster_data_directory")).fetchone()
                if row is None or Path(row[0]).resolve() != self.datadir.resolve():
                    log.debug("pg-port-foreign port=%s datadir=%s", port, row and row[0])
                    return False
                if create_db:
                    _create_database(conn)
                return True
        except psycopg.OperationalError as exc:
            self._last_refusal = str(exc).strip().replace("\n", " ")
            return False

    def _wait_ready(self, port: int, *, pid: int, proc: subprocess.Popen[bytes] | None) -> bool:
        """Poll until the server answers (True) or exits (False); ClusterError on timeout."""
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            exited = proc.poll() is not None if proc is not None else not alive(pid)
            if exited:
                return False
            if self._probe(port, create_db=True):
                return True
            if time.monotonic() > deadline:
                raise ClusterError(
                    f"PostgreSQL (pid {pid}) on {self.datadir} did not accept connections on "
                    f"port {port} within {START_TIMEOUT:.0f} s (last refusal: "
                    f"{self._last_refusal or 'none'}). Read {self.log_path}; stop it "
                    f"with `kill -INT {pid}` if it hangs.{self._log_tail(0)}"
                )
            time.sleep(POLL_INTERVAL)

    # -- start ------------------------------------------------------------------------------

    def _start(self, bindir: Path) -> int:
        self._clear_stale_pidfile()
        port = self._choose_port()
        for _ in range(PORT_ATTEMPTS):
            self._write_conf(port)
            began = time.monotonic()
            proc, log_offset = self._spawn(bindir)
            if self._wait_ready(port, pid=proc.pid, proc=proc):
                log.info(
                    "pg-started datadir=%s port=%s pid=%s user=%s elapsed_ms=%.0f",
                    self.datadir,
                    port,
                    proc.pid,
                    self.account.name,
                    (time.monotonic() - began) * 1000,
                )
                return port
            if self._port is not None or _BIND_FAILURE not in self._log_tail(log_offset):
                raise ClusterError(
                    f"PostgreSQL exited while starting on {self.datadir} (exit "
                    f"{proc.returncode}). Fix the cause in {self.log_path}:"
                    f"{self._log_tail(log_offset)}"
                )
            old, port = port, free_port()
            log.warning("pg-port-taken datadir=%s port=%s retry_port=%s", self.datadir, old, port)
        raise ClusterError(
            f"Every port tried for {self.datadir} was taken while starting; pass a free port."
        )

    def _spawn(self, bindir: Path) -> tuple[subprocess.Popen[bytes], int]:
        with self.log_path.open("ab") as server_log:
            if self.account.switch:
                os.fchown(server_log.fileno(), self.account.uid, self.account.gid)
            offset = server_log.tell()
            proc = subprocess.Popen(
                [str(bindir / "postgres"), "-D", str(self.datadir)],
                stdin=subprocess.DEVNULL,
                stdout=server_log,
                stderr=subprocess.STDOUT,
                cwd="/",
                env=server_env(),
                start_new_session=True,  # outlives us and our terminal's Ctrl-C
                **self.account.process_kwargs(),
            )
        adopt_child(proc)
        return proc, offset

    def _clear_stale_pidfile(self) -> None:
        pidfile = self.datadir / "postmaster.pid"
        if not pidfile.exists():
            return
        pid, port = self._read_pidfile()
        if pid is not None and self._is_postmaster(pid):
            raise ClusterError(
                f"PostgreSQL pid {pid} holds {self.datadir} but does not answer on port {port}. "
                f"Stop it (`kill -INT {pid}`) and retry; see {self.log_path}."
            )
        log.warning("pg-stale-pidfile datadir=%s pid=%s", self.datadir, pid)
        pidfile.unlink(missing_ok=True)
        self._wait_orphans()

    def _wait_orphans(self) -> None:
        """Wait for backends of a killed postmaster to exit (they hold its shared memory)."""

        def killing(pids: list[int]) -> None:
            log.warning("pg-orphans-killed datadir=%s pids=%s", self.datadir, pids)

        wait_orphans(self.datadir.resolve(), timeout=ORPHAN_TIMEOUT, on_kill=killing)

    def _choose_port(self) -> int:
        if self._port is not None:
            if not port_free(self._port):
                raise ClusterError(
                    f"Port {self._port} on {HOST} is in use. Pass another port, or none to let "
                    "crashresume pick a free one."
                )
            return self._port
        persisted = pgconf.persisted_port(pgconf.read(self.datadir))
        if persisted is not None and port_free(persisted):
            return persisted
        port = free_port()
        if persisted is not None:
            log.warning("pg-port-changed datadir=%s old=%s new=%s", self.datadir, persisted, port)
        return port

    def _write_conf(self, port: int) -> None:
        text = pgconf.render(
            port=port, datadir=self.datadir, bindir=self._source_bindir, settings=self._settings
        )
        tmp = self.datadir / f".{pgconf.CONF_NAME}.tmp"
        tmp.write_text(text)
        if self.account.switch:
            os.chown(tmp, self.account.uid, self.account.gid)
        tmp.replace(self.datadir / pgconf.CONF_NAME)

    def _log_tail(self, offset: int) -> str:
        try:
            with self.log_path.open("rb") as server_log:
                server_log.seek(offset)
                text = server_log.read().decode(errors="replace")
        except OSError:
            return ""
        return "\n" + text[-LOG_TAIL:].rstrip() if text.strip() else ""

    # -- stop ------------------------------------------------------------------------------

    def _stop(self, mode: StopMode) -> bool:
        pid = self.postmaster_pid()
        if pid is None:
            return False
        began = time.monotonic()
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, STOP_SIGNALS[mode])
        deadline = began + STOP_TIMEOUT
        while alive(pid):
            if time.monotonic() > deadline:
                raise ClusterError(
                    f"PostgreSQL (pid {pid}) on {self.datadir} did not stop within "
                    f"{STOP_TIMEOUT:.0f} s of a {mode} shutdown. Use stop(mode='immediate'), or "
                    f"`kill -KILL {pid}`."
                )
            time.sleep(POLL_INTERVAL)
        log.info(
            "pg-stopped datadir=%s pid=%s mode=%s elapsed_ms=%.0f",
            self.datadir,
            pid,
            mode,
            (time.monotonic() - began) * 1000,
        )
        return True


def _create_database(conn: psycopg.Connection[TupleRow]) -> None:
    found = conn.execute(query("cluster_has_database")).fetchone()
    if found is not None:
        return
    with contextlib.suppress(errors.DuplicateDatabase):
        conn.execute(query("cluster_create_database"))
        log.info("pg-database-created name=%s", pgauth.DB_NAME)
