"""A local PostgreSQL cluster the project starts itself, from a data directory it owns.

``LocalCluster(datadir).ensure_running()`` runs ``initdb`` on a missing or empty directory,
secures it (a password, ``pg_hba.conf``: see ``agent_runtime.localpg.pgauth``), starts the server
unless it already runs (see ``agent_runtime.localpg.pgserver``), creates the database
``crashresume``
and returns ``postgresql://postgres@127.0.0.1:<port>/crashresume?passfile=<datadir>.pgpass``.
The server runs in its own session and outlives the process that started it; ``stop()`` or
``remove()`` ends it.

Files: ``<datadir>/`` (owned by the server account, mode 0700), ``<datadir>/crashresume.conf``
(our settings, see ``agent_runtime.localpg.pgconf``), ``<datadir>/server.log`` (the server's
stderr),
``<datadir>.pgpass`` (the password, mode 0600, owned by whoever started the cluster) and
``<datadir>.lock`` (serialises ensure_running/stop/remove across threads and processes).

The port is persisted: a restart reuses it, unless something else took it meanwhile, in which
case a free one is picked and persisted. Extra server settings (``settings=``) are written to
the same file at every start. The server listens only on 127.0.0.1 and on a unix socket inside
the data directory, and lets in only who has the password (no ``trust``): another local
account gets neither the file nor the socket. ``fsync`` stays on: durability across crashes
is the point of the project.

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
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from agent_runtime.localpg import pgauth, pgconf
from agent_runtime.localpg.pgauth import DB_NAME as DB_NAME  # re-exported, as before pgauth
from agent_runtime.localpg.pgauth import SUPERUSER
from agent_runtime.localpg.pgbinaries import (
    BIN_CACHE,
    BINDIR_ENV,
    ClusterError,
    blocking_dir,
    find_bindir,
    is_server_bindir,
    make_dirs,
    reachable_bindir,
    run_initdb,
    server_major,
)
from agent_runtime.localpg.pgprocess import LockTimeout, file_lock
from agent_runtime.localpg.pgserver import START_TIMEOUT, STOP_SIGNALS, ServerControl, StopMode

__all__ = ["ClusterError", "LocalCluster", "StopMode", "find_bindir"]

log = logging.getLogger(__name__)

THROWAWAY_PREFIX = "crashresume-pg-"
INITDB_TIMEOUT = 300.0  # seconds
LOCK_TIMEOUT = START_TIMEOUT + INITDB_TIMEOUT  # seconds waiting for another process's start


class LocalCluster(ServerControl):
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
        self.passfile = pgauth.passfile_for(self.datadir)  # the password; see pgauth
        self._account = None
        self._source_bindir = None  # as found, before any copy; persisted

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
        return pgauth.url(port, self.passfile)

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
            if self.passfile.exists():
                pgauth.password(self.passfile)  # ours alone, or a ClusterError saying so
            running = self.postmaster_pid() is not None
            if running and pgauth.needs_securing(self.datadir, self.passfile):
                self._secure_running()  # made by an older version, and open: close it first
            port = self._running_port()
            action = "reused"
            if port is None:
                bindir = self._prepare()
                self._clear_stale_pidfile()
                if pgauth.needs_securing(self.datadir, self.passfile):
                    pgauth.secure_stopped(bindir, self.datadir, self.account, self.passfile)
                port = self._start(bindir)
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
        return pgauth.url(port, self.passfile)

    def stop(self, mode: StopMode = "fast") -> bool:
        """Stop the server; True if one was running. ``immediate`` is a crash (no checkpoint)."""
        if mode not in STOP_SIGNALS:
            raise ValueError(f"mode must be one of {', '.join(STOP_SIGNALS)}, not {mode!r}")
        with self._locked():
            return self._stop(mode)

    def remove(self) -> None:
        """Stop the server and delete the data directory, its password file and lock file."""
        with self._locked():
            try:
                self._stop("fast")
            except ClusterError:
                self._stop("immediate")
            shutil.rmtree(self.datadir, ignore_errors=True)
            self.passfile.unlink(missing_ok=True)
            self._lock_path.unlink(missing_ok=True)
        log.info("pg-removed datadir=%s", self.datadir)

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

    def _secure_running(self) -> None:
        """Secure the running server of an older version (see ``pgauth``), or refuse."""
        pid, port = self._read_pidfile()
        if port is None:
            raise ClusterError(
                f"PostgreSQL pid {pid} holds {self.datadir} but its port is unknown; stop it "
                f"(`kill -INT {pid}`) and retry: the next start sets its password."
            )
        pgauth.secure_running(port, self.datadir, self.account, self.passfile)

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
