"""Who may connect to a local cluster: the superuser's password, its file, ``pg_hba.conf``.

Nobody connects without the password, over TCP or the unix socket::

    local  all  all                 scram-sha-256
    host   all  all  127.0.0.1/32   scram-sha-256
    host   all  all  ::1/128        scram-sha-256

There is no ``trust`` line, ever: ``initdb`` runs with ``--auth=reject``, and the cluster is
secured before its first start. The socket also lives in the data directory (mode 0700, owned
by the server account), and the server listens on 127.0.0.1 only.

The password (``secrets.token_urlsafe``, 256 bits) is made when a cluster is first secured and
kept in ``<datadir>.pgpass`` next to the data directory, a libpq password file
(``*:*:*:postgres:<password>``) of mode 0600 owned by the user who started the cluster (root,
when root starts it: the server account never needs it). URLs name that file
(``postgresql://postgres@127.0.0.1:<port>/crashresume?passfile=<file>``) and never hold the
password, so the URL in ``ps``, in a log line or in an error message gives nothing away, and
works only for who can read the file. The server keeps only the SCRAM-SHA-256 verifier,
computed here and set with ``ALTER ROLE``.

A cluster is secured (:func:`needs_securing` false) when its ``pg_hba.conf`` is exactly the
text above and its password file exists. A cluster made by an older version (``trust``, no
password file) is secured on its next ``ensure_running``:

- stopped: the verifier is set in single-user mode (``postgres --single``, no network), the
  file rewritten, then the server starts;
- running: the verifier is set over a connection the old ``trust`` still allows, the file
  rewritten and reloaded, and the call waits until a connection without the password is
  refused. A running server that lets us in neither way (its password file was deleted) is
  refused with a ``ClusterError`` that says to stop it; the next start then secures it.

Every step may be repeated: an existing password file is reused, never replaced.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import logging
import os
import secrets
import stat
import subprocess
import tempfile
import time
from pathlib import Path
from urllib.parse import quote

import psycopg
from psycopg import sql
from psycopg.conninfo import make_conninfo

from agent_runtime.localpg.pgbinaries import ClusterError, ServerAccount, server_env
from agent_runtime.localpg.pgprocess import HOST, POLL_INTERVAL
from agent_runtime.store.queries import query

log = logging.getLogger(__name__)

SUPERUSER = "postgres"
DB_NAME = "crashresume"  # also in sql/cluster.sql, which creates it
PASSFILE_SUFFIX = ".pgpass"
HBA_NAME = "pg_hba.conf"
HBA_TEXT = (
    "# Written by crashresume (agent_runtime.localpg.pgauth); edits are lost at the next start.\n"
    "# Nobody connects without the password in the file next to the data directory.\n"
    "local  all  all                 scram-sha-256\n"
    "host   all  all  127.0.0.1/32   scram-sha-256\n"
    "host   all  all  ::1/128        scram-sha-256\n"
)
PASSWORD_BYTES = 32  # of randomness; token_urlsafe makes 43 characters, none needing escapes
SCRAM_ITERATIONS = 4096  # PostgreSQL's default scram_iterations
SINGLE_USER_TIMEOUT = 120.0  # seconds; single-user mode first replays the WAL of a crash
RELOAD_TIMEOUT = 10.0  # seconds for a reloaded pg_hba.conf to refuse a password-less login
CONNECT_TIMEOUT = 2  # seconds


def passfile_for(datadir: Path) -> Path:
    """``<datadir>.pgpass``: next to the data directory, not in it (the server account owns
    that, and as root the password belongs to root)."""
    return datadir.with_name(datadir.name + PASSFILE_SUFFIX)


def url(port: int, passfile: Path) -> str:
    """The URL of the cluster's database; libpq reads the password from ``passfile``."""
    return f"postgresql://{SUPERUSER}@{HOST}:{port}/{DB_NAME}?passfile={quote(str(passfile))}"


def conninfo(port: int, passfile: Path, *, dbname: str = "postgres") -> str:
    """A conninfo string for the cluster's own maintenance connections. The empty password
    makes libpq read ``passfile`` even where ``$PGPASSWORD`` is set (for another server)."""
    return make_conninfo(
        host=HOST,
        port=port,
        user=SUPERUSER,
        dbname=dbname,
        password="",
        passfile=str(passfile),
        sslmode="disable",
    )


def needs_securing(datadir: Path, passfile: Path) -> bool:
    """Whether the cluster's ``pg_hba.conf`` is not ours or its password file is missing."""
    try:
        hba = (datadir / HBA_NAME).read_text()
    except OSError:
        hba = ""
    return hba != HBA_TEXT or not passfile.exists()


def password(passfile: Path) -> str:
    """The password in ``passfile``; ``ClusterError`` if it is not ours alone."""
    return _read_password(passfile)


def _password_to_set(passfile: Path) -> tuple[str, bool]:
    """The password in ``passfile``, else a new one (and True: save it once the server has
    it, so that the file never names a password the server does not know)."""
    try:
        return _read_password(passfile), False
    except FileNotFoundError:
        return secrets.token_urlsafe(PASSWORD_BYTES), True


def _save_password(passfile: Path, secret: str) -> None:
    """Write ``passfile`` (mode 0600 from the start, replaced atomically)."""
    fd, tmp = tempfile.mkstemp(prefix=f".{passfile.name}.", dir=passfile.parent)  # 0600
    try:
        with os.fdopen(fd, "w") as out:
            out.write(f"*:*:*:{SUPERUSER}:{secret}\n")
        os.replace(tmp, passfile)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        raise ClusterError(f"Cannot write the cluster's password file {passfile} ({exc}).") from exc
    log.info("pg-password-created passfile=%s", passfile)


def _read_password(passfile: Path) -> str:
    try:
        fd = os.open(passfile, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise ClusterError(
            f"Cannot read the password file {passfile} ({exc}); it must be a regular file "
            f"owned by uid {os.geteuid()} with mode 0600."
        ) from exc
    with os.fdopen(fd) as src:
        st = os.fstat(src.fileno())
        if st.st_uid != os.geteuid() or st.st_mode & 0o077 or not stat.S_ISREG(st.st_mode):
            raise ClusterError(
                f"The password file {passfile} must be a regular file owned by uid "
                f"{os.geteuid()} with mode 0600 (it is uid {st.st_uid}, mode "
                f"{st.st_mode & 0o777:o}). Fix it with `chmod 600`, or stop the cluster, "
                "remove the file and start it again to set a new password."
            )
        fields = src.readline().rstrip("\n").split(":")
    if len(fields) != 5 or fields[3] != SUPERUSER or not fields[4]:
        raise ClusterError(
            f"The password file {passfile} does not hold a `*:*:*:{SUPERUSER}:<password>` line. "
            "Stop the cluster, remove the file and start it again to set a new password."
        )
    return fields[4]


def scram_verifier(secret: str, salt: bytes | None = None) -> str:
    """The SCRAM-SHA-256 verifier PostgreSQL stores for ``secret`` (RFC 5802, 7677).

    ``secret`` is ASCII (from :func:`password`), which SASLprep leaves as it is."""
    salt = salt if salt is not None else secrets.token_bytes(16)
    salted = hashlib.pbkdf2_hmac("sha256", secret.encode(), salt, SCRAM_ITERATIONS)
    client_key = hmac.new(salted, b"Client Key", "sha256").digest()
    server_key = hmac.new(salted, b"Server Key", "sha256").digest()
    stored_key = hashlib.sha256(client_key).digest()

    def b64(raw: bytes) -> str:
        return base64.b64encode(raw).decode()

    return f"SCRAM-SHA-256${SCRAM_ITERATIONS}:{b64(salt)}${b64(stored_key)}:{b64(server_key)}"


def _set_password_sql(secret: str) -> sql.Composed:
    return query("cluster_set_password").format(verifier=sql.Literal(scram_verifier(secret)))


def write_hba(datadir: Path, account: ServerAccount) -> None:
    """Replace ``pg_hba.conf`` with :data:`HBA_TEXT` (atomically, owned by the server)."""
    tmp = datadir / f".{HBA_NAME}.tmp"
    tmp.write_text(HBA_TEXT)
    tmp.chmod(0o600)
    if account.switch:
        os.chown(tmp, account.uid, account.gid)
    tmp.replace(datadir / HBA_NAME)


def secure_stopped(bindir: Path, datadir: Path, account: ServerAccount, passfile: Path) -> None:
    """Set the password in single-user mode and write ``pg_hba.conf``; no server may run."""
    began = time.monotonic()
    secret, new = _password_to_set(passfile)
    statement = _set_password_sql(secret).as_string(None)
    try:
        done = subprocess.run(
            [str(bindir / "postgres"), "--single", "-D", str(datadir), SUPERUSER],
            input=statement + "\n",
            capture_output=True,
            text=True,
            timeout=SINGLE_USER_TIMEOUT,
            cwd="/",
            env=server_env(),
            **account.process_kwargs(),
        )
    except (OSError, subprocess.SubprocessError) as exc:
        raise ClusterError(f"Cannot run {bindir / 'postgres'} --single ({exc}).") from exc
    output = (done.stdout + done.stderr).replace(statement, "ALTER ROLE ... PASSWORD ***")
    if done.returncode != 0 or "ERROR:" in output or "FATAL:" in output:
        raise ClusterError(
            f"Setting the password of {datadir} in single-user mode failed (exit "
            f"{done.returncode}): {output.strip()[-2000:]}"
        )
    if new:
        _save_password(passfile, secret)
    write_hba(datadir, account)
    log.info(
        "pg-secured datadir=%s how=single-user elapsed_ms=%.0f",
        datadir,
        (time.monotonic() - began) * 1000,
    )


def secure_running(port: int, datadir: Path, account: ServerAccount, passfile: Path) -> None:
    """Set the password over a connection, write ``pg_hba.conf`` and reload it; wait until a
    login without the password is refused. ``ClusterError`` if we cannot log in."""
    began = time.monotonic()
    secret, new = _password_to_set(passfile)
    try:
        with psycopg.connect(
            conninfo(port, passfile), autocommit=True, connect_timeout=CONNECT_TIMEOUT
        ) as conn:
            conn.execute(_set_password_sql(secret))
            if new:
                _save_password(passfile, secret)
            write_hba(datadir, account)
            conn.execute(query("cluster_reload_conf"))
    except psycopg.Error as exc:
        raise ClusterError(
            f"The PostgreSQL server running on {datadir} needs its password set and "
            f"pg_hba.conf rewritten, but it did not let crashresume in ({_first_line(exc)}). "
            "Stop it (`python -m agent_runtime db stop`, or `kill -INT <pid in "
            "postmaster.pid>`) and retry: the next start secures it."
        ) from exc
    _wait_refused(port, datadir)
    log.info(
        "pg-secured datadir=%s how=reload elapsed_ms=%.0f",
        datadir,
        (time.monotonic() - began) * 1000,
    )


def _wait_refused(port: int, datadir: Path) -> None:
    """Until a login without any password fails (the reload is asynchronous)."""
    nopass = conninfo(port, datadir / ".no-password-file")  # no password: a missing file
    deadline = time.monotonic() + RELOAD_TIMEOUT
    while True:
        try:
            psycopg.connect(nopass, connect_timeout=CONNECT_TIMEOUT).close()
        except psycopg.OperationalError:
            return
        if time.monotonic() > deadline:
            raise ClusterError(
                f"PostgreSQL on {datadir} still lets anyone in {RELOAD_TIMEOUT:.0f} s after "
                f"its {HBA_NAME} was rewritten. Stop it (`python -m agent_runtime db stop`)."
            )
        time.sleep(POLL_INTERVAL * 5)


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]
