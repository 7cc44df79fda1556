"""Who gets into the local cluster (issue 22, point 1): its owner with the URL, nobody else.

Real clusters and real processes: the other account is a real OS account (``nobody``, or
another existing one if the server runs as ``nobody``) reached through ``runuser``, with the
system's ``psql``; so these tests need root. No account is created.
"""

from __future__ import annotations

import base64
import logging
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from agent_runtime.localpg import pgauth
from agent_runtime.localpg.pgbinaries import server_account
from agent_runtime.localpg.pgcluster import THROWAWAY_PREFIX, ClusterError, LocalCluster

OTHER_ACCOUNTS = ("nobody", "daemon", "bin")  # existing accounts; none is ever created
TRUST_HBA = (  # what initdb --auth=trust wrote for clusters of older versions
    "local   all             all                                     trust\n"
    "host    all             all             127.0.0.1/32            trust\n"
    "host    all             all             ::1/128                 trust\n"
)


def _other_account() -> str:
    """An existing account that is neither us nor the server's, or skip."""
    if os.geteuid() != 0:
        pytest.skip("needs root, to run a client as another account with runuser")
    if shutil.which("runuser") is None or shutil.which("psql") is None:
        pytest.skip("needs runuser and psql to connect as another account")
    server = server_account().name
    for name in OTHER_ACCOUNTS:
        try:
            entry = pwd.getpwnam(name)
        except KeyError:
            continue
        if name != server and entry.pw_uid != 0:
            return name
    pytest.skip(f"no account among {OTHER_ACCOUNTS} other than the server's ({server})")


def _psql_as(account: str, conninfo: str, sql: str) -> subprocess.CompletedProcess[str]:
    """``psql`` run as ``account``, never prompting for a password."""
    return subprocess.run(
        ["runuser", "-u", account, "--", "psql", "--no-password", conninfo, "-Atc", sql],
        capture_output=True,
        text=True,
        timeout=60,
        cwd="/",
        env={k: v for k, v in os.environ.items() if not k.startswith("PG")},
        check=False,
    )


def _socket_conninfo(cluster: LocalCluster) -> str:
    return f"host={cluster.datadir} port={cluster.port} user=postgres dbname=crashresume"


def _one(url: str, sql: str) -> object:
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(sql).fetchone()
    assert row is not None
    return row[0]


@pytest.fixture
def home() -> Iterator[Path]:
    root = Path(tempfile.mkdtemp(prefix=THROWAWAY_PREFIX))
    root.chmod(0o755)  # ours: the server account must be able to enter it
    try:
        yield root / "home"
    finally:
        LocalCluster(root / "home" / "pgdata").remove()
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def cluster(home: Path) -> LocalCluster:
    return LocalCluster(home / "pgdata")


def _make_legacy(cluster: LocalCluster) -> None:
    """Turn a running cluster into what an older version left: trust, no password at all."""
    with psycopg.connect(cluster.url, autocommit=True) as conn:
        conn.execute("ALTER ROLE postgres PASSWORD NULL")
        (cluster.datadir / "pg_hba.conf").write_text(TRUST_HBA)  # keeps its owner
        conn.execute("SELECT pg_reload_conf()")
    cluster.passfile.unlink()


def _assert_only_the_owner_gets_in(cluster: LocalCluster, url: str) -> None:
    other = _other_account()
    assert _one(url, "SELECT current_user") == "postgres"
    marker = Path(tempfile.gettempdir()) / f"crashresume-auth-{os.getpid()}"
    marker.unlink(missing_ok=True)
    attack = f"COPY (SELECT 1) TO PROGRAM 'id > {marker}'"
    for conninfo in (url, cluster.url, _socket_conninfo(cluster)):
        out = _psql_as(other, conninfo, attack)
        assert out.returncode != 0, out.stdout
        assert not marker.exists()
    by_tcp = _psql_as(other, url, "SELECT 1")
    assert "no password supplied" in by_tcp.stderr
    by_socket = _psql_as(other, _socket_conninfo(cluster), "SELECT 1")
    assert "Permission denied" in by_socket.stderr  # the 0700 data directory
    # The server account reaches the socket (it owns the directory); the password still rules.
    account = cluster.account.name
    if cluster.account.switch and account != other:
        as_server = _psql_as(account, _socket_conninfo(cluster), "SELECT 1")
        assert "no password supplied" in as_server.stderr


# -- a new cluster ------------------------------------------------------------------------


def test_only_the_owner_gets_in_with_the_url_db_url_prints(home: Path) -> None:
    _other_account()
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    env["CRASHRESUME_HOME"] = str(home)
    printed = subprocess.run(
        [sys.executable, "-m", "agent_runtime", "db", "url"],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert printed.returncode == 0, printed.stderr
    url = printed.stdout.strip()
    cluster = LocalCluster(home / "pgdata")
    assert url == cluster.url
    _assert_only_the_owner_gets_in(cluster, url)
    # The owner's own psql takes the same URL as it is printed.
    done = subprocess.run(
        ["psql", "--no-password", url, "-Atc", "SELECT current_database()"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.stdout.strip() == "crashresume", done.stderr


def test_no_trust_line_and_a_password_file_only_its_owner_can_read(
    cluster: LocalCluster,
) -> None:
    url = cluster.ensure_running()
    hba = (cluster.datadir / "pg_hba.conf").read_text()
    assert hba == pgauth.HBA_TEXT
    assert "trust" not in hba
    rules = _one(url, "SELECT array_agg(DISTINCT auth_method) FROM pg_hba_file_rules")
    assert rules == ["scram-sha-256"]
    st = cluster.passfile.stat()
    assert st.st_mode & 0o777 == 0o600
    assert st.st_uid == os.geteuid()
    assert cluster.passfile.parent == cluster.datadir.parent
    assert url.endswith(f"?passfile={cluster.passfile}")


def test_the_password_is_in_no_url_log_line_or_command_line(
    cluster: LocalCluster, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    url = cluster.ensure_running()
    _make_legacy(cluster)
    cluster.ensure_running()  # the upgrade logs too
    secret = pgauth.password(cluster.passfile)
    assert secret not in url
    assert all(secret not in record.getMessage() for record in caplog.records)
    assert secret not in (cluster.datadir / "server.log").read_text()
    pid = cluster.postmaster_pid()
    assert pid is not None
    assert secret.encode() not in Path(f"/proc/{pid}/cmdline").read_bytes()
    stored = _one(url, "SELECT rolpassword FROM pg_authid WHERE rolname = 'postgres'")
    assert isinstance(stored, str) and stored.startswith("SCRAM-SHA-256$4096:")


# -- a cluster made by an older version -----------------------------------------------------


def test_a_stopped_trust_cluster_of_an_older_version_is_secured_on_its_next_start(
    cluster: LocalCluster,
) -> None:
    url = cluster.ensure_running()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE TABLE kept AS SELECT 42 AS answer")
    _make_legacy(cluster)
    cluster.stop()

    again = cluster.ensure_running()

    assert again == url
    assert (cluster.datadir / "pg_hba.conf").read_text() == pgauth.HBA_TEXT
    assert cluster.passfile.stat().st_mode & 0o777 == 0o600
    assert _one(again, "SELECT answer FROM kept") == 42
    _assert_only_the_owner_gets_in(cluster, again)


def test_a_running_trust_cluster_of_an_older_version_is_secured_without_a_restart(
    cluster: LocalCluster,
) -> None:
    url = cluster.ensure_running()
    _make_legacy(cluster)
    pid = cluster.postmaster_pid()
    other = _other_account()
    assert _psql_as(other, url, "SELECT 1").returncode == 0  # wide open, as it was

    assert cluster.ensure_running() == url

    assert cluster.postmaster_pid() == pid
    assert (cluster.datadir / "pg_hba.conf").read_text() == pgauth.HBA_TEXT
    _assert_only_the_owner_gets_in(cluster, url)


def test_a_running_cluster_whose_password_file_is_gone_is_refused_until_stopped(
    cluster: LocalCluster,
) -> None:
    cluster.ensure_running()
    cluster.passfile.unlink()

    with pytest.raises(ClusterError, match="did not let crashresume in") as refused:
        cluster.ensure_running()
    assert "db stop" in str(refused.value)
    assert "\n" not in str(refused.value)

    cluster.stop()
    url = cluster.ensure_running()  # a new password, set in single-user mode
    assert _one(url, "SELECT 1") == 1


def test_a_password_file_others_may_read_is_refused(cluster: LocalCluster) -> None:
    cluster.ensure_running()
    cluster.stop()
    cluster.passfile.chmod(0o644)
    with pytest.raises(ClusterError, match="mode 0600") as refused:
        cluster.ensure_running()
    assert "chmod 600" in str(refused.value)
    assert cluster.postmaster_pid() is None


def test_the_scram_verifier_is_the_one_libpq_computes(cluster: LocalCluster) -> None:
    url = cluster.ensure_running()
    with psycopg.connect(url) as conn:
        reference = conn.pgconn.encrypt_password(b"pencil", b"postgres", b"scram-sha-256")
    salt = base64.b64decode(reference.decode().split("$")[1].split(":")[1])
    assert pgauth.scram_verifier("pencil", salt) == reference.decode()


def test_a_pgpassword_for_another_server_does_not_stop_the_cluster_starting(
    cluster: LocalCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PGPASSWORD", "meant-for-another-server")
    url = cluster.ensure_running()
    cluster.stop()
    assert cluster.ensure_running() == url
    assert cluster.is_running()
