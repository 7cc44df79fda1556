"""A real PgBouncer in front of the test's PostgreSQL, started by the test itself.

Debian's ``pgbouncer`` (``.ci/run`` installs it); a test that needs it skips with the
reason where the binary is missing. PgBouncer refuses to run as root, so as root it runs as
the server's unprivileged account (``pgbinaries.server_account``), in a directory of its
own (mode 0700) that holds its configuration and its password list (mode 0600).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

import pytest
from psycopg.conninfo import conninfo_to_dict

from agent_runtime.localpg.pgbinaries import server_account
from agent_runtime.localpg.pgprocess import HOST, free_port

BINARIES = ("/usr/sbin/pgbouncer", "/usr/bin/pgbouncer")
START_TIMEOUT = 20.0  # seconds for PgBouncer to accept connections


def binary() -> str | None:
    found = shutil.which("pgbouncer")
    return found or next((b for b in BINARIES if os.access(b, os.X_OK)), None)


def _password(url: str) -> tuple[dict[str, str], str]:
    """The URL's parts and its password (given, or read from its passfile)."""
    info = {k: str(v) for k, v in conninfo_to_dict(url).items() if v is not None}
    if "password" in info:
        return info, info["password"]
    passfile = info.get("passfile") or os.environ.get("PGPASSFILE", "")
    if not passfile:
        pytest.skip("the test database's URL carries no password PgBouncer could use")
    for line in Path(passfile).read_text(encoding="utf-8").splitlines():
        fields = line.split(":")
        if len(fields) == 5 and fields[3] in ("*", info.get("user", "")):
            return info, fields[4]
    pytest.skip(f"no password for the test database in {passfile}")


@dataclass(frozen=True)
class Bouncer:
    url: str  # the test database, reached through PgBouncer
    mode: str


@contextlib.contextmanager
def pgbouncer(database_url: str, mode: str, pool_size: int = 2) -> Iterator[Bouncer]:
    """PgBouncer in ``mode`` (transaction, statement, session) with ``pool_size`` server
    connections, in front of ``database_url``."""
    exe = binary()
    if exe is None:
        pytest.skip("pgbouncer is not installed (apt-get install pgbouncer; .ci/run does)")
    info, password = _password(database_url)
    account = server_account()
    home = Path(tempfile.mkdtemp(prefix="crashresume-pgbouncer-"))
    port = free_port()
    user, dbname = info.get("user", "postgres"), info.get("dbname", "postgres")
    (home / "userlist.txt").write_text(f'"{user}" "{password}"\n', encoding="utf-8")
    (home / "pgbouncer.ini").write_text(
        "\n".join(
            [
                "[databases]",
                f"{dbname} = host={info.get('host', HOST)} port={info.get('port', 5432)} "
                f"dbname={dbname}",
                "[pgbouncer]",
                f"listen_addr = {HOST}",
                f"listen_port = {port}",
                "unix_socket_dir =",
                "auth_type = scram-sha-256",
                f"auth_file = {home / 'userlist.txt'}",
                f"pool_mode = {mode}",
                f"default_pool_size = {pool_size}",
                "max_client_conn = 200",
                "ignore_startup_parameters = extra_float_digits",
                "",
            ]
        ),
        encoding="utf-8",
    )
    for path in (home / "userlist.txt", home / "pgbouncer.ini"):
        path.chmod(0o600)
    if account.switch:  # ours alone, handed to the account PgBouncer runs as
        for path in (home, home / "userlist.txt", home / "pgbouncer.ini"):
            os.chown(path, account.uid, account.gid)
    proc = subprocess.Popen(
        [exe, str(home / "pgbouncer.ini")],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        **account.process_kwargs(),
    )
    try:
        _wait_listening(proc, port)
        auth = f"password={quote(password)}"
        yield Bouncer(url=f"postgresql://{user}@{HOST}:{port}/{dbname}?{auth}", mode=mode)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        if proc.stderr is not None:
            proc.stderr.close()
        shutil.rmtree(home, ignore_errors=True)


def _wait_listening(proc: subprocess.Popen[str], port: int) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            err = proc.stderr.read() if proc.stderr else ""
            pytest.fail(f"pgbouncer exited with {proc.returncode}: {err.strip()[-2000:]}")
        with contextlib.suppress(OSError), socket.create_connection((HOST, port), timeout=1):
            return
        time.sleep(0.05)  # real time: a child process starting up, no lease involved
    pytest.fail(f"pgbouncer did not listen on {HOST}:{port} within {START_TIMEOUT}s")
