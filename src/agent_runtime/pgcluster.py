"""A local PostgreSQL cluster the project starts itself, from a data directory it owns.

``LocalCluster(datadir).ensure_running()`` runs ``initdb`` on a missing or empty directory,
starts the server unless it already runs (a stale ``postmaster.pid`` left by a killed server is
cleared, orphaned backends are waited for), creates the database ``crashresume`` and returns
``postgresql://postgres@127.0.0.1:<port>/crashresume``. The server runs in its own session and
outlives the process that started it; ``stop()`` or ``remove()`` ends it.

Files: ``<datadir>/`` (owned by the server account, mode 0700), ``<datadir>/crashresume.conf``
(our settings, see ``agent_runtime.pgconf``), ``<datadir>/server.log`` (the server's stderr) and
``<datadir>.lock`` (serialises ensure_running/stop/remove across threads and processes).

The port is persisted: a restart reuses it, unless something else took it meanwhile, in which
case a free one is picked and persisted. Extra server settings (``settings=``) are written to
the same file at every start. The server listens only on
127.0.0.1 and on a unix socket inside the data directory, with ``trust`` authentication: a
development and test cluster (any local user may connect as superuser), not a shared server.
``fsync`` stays on: durability across crashes is the point of the project.

Running as root: the server runs as an existing unprivileged account (see ``pgbinaries``).
That account must be able to traverse every directory above the data directory. If it cannot,
``ensure_running`` raises ``ClusterError`` naming the blocking directory. There is deliberately
no fallback location: data that silently lands elsewhere would be looked for in the wrong
place by the next command (``stop``, ``status``, a restarted agent). Permissions are changed
only on directories this module creates (the data directory, its missing parents, 0755).

Errors: ``ClusterError`` (from ``pgbinaries``, re-exported here), its message says what to do.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Literal

import psycopg
from psycopg import errors
from psycopg.conninfo import make_conninfo
from psycopg.rows import TupleRow

from agent_runtime import pgconf
from agent_runtime.pgbinaries import (
    BIN_CACHE,
    BINDIR_ENV,
    ClusterError,
    ServerAccount,
    blocking_dir,
    find_bindir,
    is_server_bindir,
    make_dirs,
    reachable_bindir,
    run_initdb,
    server_account,
    server_env,
    server_major,
)
from agent_runtime.pgprocess import (
    HOST,
    POLL_INTERVAL,
    LockTimeout,
    adopt_child,
    alive,
    cwd_of,
    file_lock,
    free_port,
    port_free,
    wait_orphans,
)
from agent_runtime.queries import query

__all__ = ["ClusterError", "LocalCluster", "StopMode", "find_bindir"]

log = logging.getLogger(__name__)

StopMode = Literal["smart", "fast", "immediate"]

DB_NAME = "crashresume"  # also in sql/cluster.sql, which creates it
SUPERUSER = "postgres"
THROWAWAY_PREFIX = "crashresume-pg-"
LOG_NAME = "server.log"
INITDB_TIMEOUT = 300.0  # seconds
START_TIMEOUT = 60.0  # seconds; crash recovery replays WAL before accepting connections
STOP_TIMEOUT = 60.0  # seconds; a fast stop writes a shutdown checkpoint first
LOCK_TIMEOUT = START_TIMEOUT + INITDB_TIMEOUT  # seconds waiting for another process's start
ORPHAN_TIMEOUT = 5.0  # seconds for backends of a killed postmaster to notice and exit
CONNECT_TIMEOUT = 2  # seconds; libpq's smallest useful connect_timeout
PORT_ATTEMPTS = 5  # fresh ports tried when the chosen one is taken during start
LOG_TAIL = 2000  # characters of server.log quoted in errors
_STOP_SIGNALS = {"smart": signal.SIGTERM, "fast": signal.SIGINT, "immediate": signal.SIGQUIT}
_BIND_FAILURE = "could not create any TCP/IP sockets"


class LocalCluster:
    """One PostgreSQL data directory and the server running on it (see the module docstring)."""

    def __init__(
        self,
        datadir: Path,
        bindir: Path | None = None,
        port: int | None = None,
        *,
        bin_cache: Path = BIN_CACHE,
        settings: pgconf.Settings | None = None,
    ) -> None:
        self.datadir = Path(os.path.abspath(datadir))
        self._settings = pgconf.checked(settings)
        self._bindir = bindir
        self._port = port
        self._bin_cache = bin_cache
        self._lock_path = self.datadir.with_name(self.datadir.name + ".lock")
        self._account: ServerAccount | None = None
        self._source_bindir: Path | None = None  # as found, before any copy; persisted

    @classmethod
    def throwaway(
        cls,
        bindir: Path | None = None,
        *,
        bin_cache: Path = BIN_CACHE,
        settings: pgconf.Settings | None = None,
    ) -> LocalCluster:
        """A cluster in a fresh ``/tmp/crashresume-pg-*`` directory; ``remove()`` deletes it."""
        datadir = Path(tempfile.mkdtemp(prefix=THROWAWAY_PREFIX))
        return cls(datadir, bindir, bin_cache=bin_cache, settings=settings)

    def __repr__(self) -> str:
        return f"LocalCluster({str(self.datadir)!r})"

    @property
    def account(self) -> ServerAccount:
        """The OS account the server runs as."""
        if self._account is None:
            self._account = server_account()
        return self._account

    @property
    def log_path(self) -> Path:
        return self.datadir / LOG_NAME

    @property
    def initialised(self) -> bool:
        return (self.datadir / "PG_VERSION").is_file()

    @property
    def port(self) -> int | None:
        """The running server's port, else the one asked for, else the persisted one."""
        pid, port = self._read_pidfile()
        if pid is not None and port is not None and self._is_postmaster(pid):
            return port
        return self._port or pgconf.persisted_port(pgconf.read(self.datadir))

    @property
    def url(self) -> str:
        port = self.port
        if port is None:
            raise ClusterError(f"{self.datadir} holds no cluster yet; call ensure_running().")
        return _url(port)

    def postmaster_pid(self) -> int | None:
        """The pid of the live postmaster on this data directory, if any."""
        pid, _ = self._read_pidfile()
        return pid if pid is not None and self._is_postmaster(pid) else None

    def is_running(self) -> bool:
        """Whether a postmaster owns the data directory and answers on its port."""
        pid, port = self._read_pidfile()
        if pid is None or port is None or not self._is_postmaster(pid):
            return False
        return self._probe(port, create_db=False)

    def ensure_running(self) -> str:
        """Initialise and start the cluster as needed; return the database URL."""
        began = time.monotonic()
        self._check_location()
        with self._locked():
            port = self._running_port()
            action = "reused"
            if port is None:
                port = self._start(self._prepare())
                action = "started"
        # Reusing the running server is every CLI call's normal case: not worth a line.
        log.log(
            logging.INFO if action == "started" else logging.DEBUG,
            "pg-ready datadir=%s port=%s action=%s elapsed_ms=%.0f",
            self.datadir,
            port,
            action,
            (time.monotonic() - began) * 1000,
        )
        return _url(port)

    def stop(self, mode: StopMode = "fast") -> bool:
        """Stop the server; True if one was running. ``immediate`` is a crash (no checkpoint)."""
        if mode not in _STOP_SIGNALS:
            raise ValueError(f"mode must be one of {', '.join(_STOP_SIGNALS)}, not {mode!r}")
        with self._locked():
            return self._stop(mode)

    def remove(self) -> None:
        """Stop the server and delete the data directory and its lock file."""
        with self._locked():
            try:
                self._stop("fast")
            except ClusterError:
                self._stop("immediate")
            shutil.rmtree(self.datadir, ignore_errors=True)
            self._lock_path.unlink(missing_ok=True)
        log.info("pg-removed datadir=%s", self.datadir)

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
                _conninfo(port, "postgres"), autocommit=True, connect_timeout=CONNECT_TIMEOUT
            ) as conn:
                row = conn.execute(query("cluster_data_directory")).fetchone()
                if row is None or Path(row[0]).resolve() != self.datadir.resolve():
                    log.debug("pg-port-foreign port=%s datadir=%s", port, row and row[0])
                    return False
                if create_db:
                    _create_database(conn)
                return True
        except psycopg.OperationalError:
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
                    f"port {port} within {START_TIMEOUT:.0f} s. Read {self.log_path}; stop it "
                    f"with `kill -INT {pid}` if it hangs.{self._log_tail(0)}"
                )
            time.sleep(POLL_INTERVAL)

    # -- initialise and start -----------------------------------------------------------------

    def _check_location(self) -> None:
        """As root: refuse a data directory the server account cannot reach (creates nothing)."""
        if self.account.switch:
            blocker = blocking_dir(self.datadir.parent, self.account)
            if blocker is not None:
                raise ClusterError(
                    f"PostgreSQL runs as {self.account.name!r} (it refuses to run as root), and "
                    f"that account cannot traverse {blocker} (mode "
                    f"{blocker.stat().st_mode & 0o777:o}), so it cannot reach {self.datadir}. "
                    "Choose a data directory under a path it can enter (for the CLI: set "
                    "CRASHRESUME_HOME, e.g. to /var/lib/crashresume or /tmp/crashresume), make "
                    f"{blocker} traversable yourself (chmod o+x), or set DATABASE_URL."
                )

    def _prepare(self) -> Path:
        """Run initdb if needed; return the bindir the server can run."""
        if self.initialised:
            major = int((self.datadir / "PG_VERSION").read_text().strip().split(".")[0])
            return self._server_bindir(major)
        if self.datadir.exists() and (not self.datadir.is_dir() or any(self.datadir.iterdir())):
            raise ClusterError(
                f"{self.datadir} exists but is not a PostgreSQL data directory (no PG_VERSION) "
                "and is not empty. Point to an empty or missing directory, or remove it."
            )
        bindir = self._server_bindir(None)
        self._initdb(bindir)
        return bindir

    def _server_bindir(self, major: int | None) -> Path:
        persisted = pgconf.persisted_bindir(pgconf.read(self.datadir))
        if self._bindir is not None:
            source = self._bindir
        elif persisted and not os.environ.get(BINDIR_ENV) and is_server_bindir(Path(persisted)):
            source = Path(persisted)  # the binaries that created or last ran this cluster
        else:
            source = find_bindir()
        if major is not None and server_major(source) != major:
            raise ClusterError(
                f"{self.datadir} was created by PostgreSQL {major}, but {source} holds "
                f"PostgreSQL {server_major(source)}. Set {BINDIR_ENV} to PostgreSQL {major} "
                "binaries, or remove the data directory to start afresh."
            )
        self._source_bindir = source
        return reachable_bindir(source, self.account, self._bin_cache)

    def _initdb(self, bindir: Path) -> None:
        began = time.monotonic()
        make_dirs(self.datadir.parent, mode=0o755)
        self.datadir.mkdir(mode=0o700, exist_ok=True)
        if self.account.switch:
            os.chown(self.datadir, self.account.uid, self.account.gid)
        self.datadir.chmod(0o700)
        run_initdb(bindir, self.datadir, self.account, superuser=SUPERUSER, timeout=INITDB_TIMEOUT)
        with (self.datadir / "postgresql.conf").open("a") as conf:
            conf.write(f"\ninclude_if_exists = '{pgconf.CONF_NAME}'  # crashresume settings\n")
        log.info(
            "pg-initdb datadir=%s bindir=%s elapsed_ms=%.0f",
            self.datadir,
            bindir,
            (time.monotonic() - began) * 1000,
        )

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
            os.kill(pid, _STOP_SIGNALS[mode])
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

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        make_dirs(self._lock_path.parent, mode=0o755)
        try:
            with file_lock(self._lock_path, timeout=LOCK_TIMEOUT):
                yield
        except LockTimeout:
            raise ClusterError(
                f"Another process has held {self._lock_path} for "
                f"{LOCK_TIMEOUT:.0f} s. Find it with `fuser {self._lock_path}`."
            ) from None


def _create_database(conn: psycopg.Connection[TupleRow]) -> None:
    found = conn.execute(query("cluster_has_database")).fetchone()
    if found is not None:
        return
    with contextlib.suppress(errors.DuplicateDatabase):
        conn.execute(query("cluster_create_database"))
        log.info("pg-database-created name=%s", DB_NAME)


def _url(port: int) -> str:
    return f"postgresql://{SUPERUSER}@{HOST}:{port}/{DB_NAME}"


def _conninfo(port: int, dbname: str) -> str:
    return make_conninfo(host=HOST, port=port, user=SUPERUSER, dbname=dbname, sslmode="disable")
