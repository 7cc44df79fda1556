"""The local PostgreSQL cluster's life cycle, with real processes and a real server (as root
here): creation by an unprivileged account, restarts, crashes, concurrent starts, refusals.

Every cluster made here is removed at the end of its test; the module checks that no server
it started outlives it. Where binaries and a database URL come from: test_pgsources.py.
"""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from agent_runtime.localpg import pgbinaries
from agent_runtime.localpg.pgcluster import (
    ClusterError,
    LocalCluster,
)

from .fix_pgcluster import no_server_left, one

AS_ROOT = os.geteuid() == 0


@pytest.fixture(scope="module", autouse=True)
def no_server_outlives_the_module() -> Iterator[None]:
    yield
    no_server_left()


def _wait_dead(pid: int) -> None:
    deadline = time.monotonic() + 10
    while Path(f"/proc/{pid}").exists() and "Z" not in _proc_state(pid):
        assert time.monotonic() < deadline, f"pid {pid} did not die"
        time.sleep(0.01)


def _proc_state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except (OSError, IndexError):
        return "X"


# -- life cycle -------------------------------------------------------------------------------


def test_an_empty_directory_becomes_a_running_cluster_run_by_an_unprivileged_user(
    cluster: LocalCluster,
) -> None:
    assert not cluster.datadir.exists()
    url = cluster.ensure_running()

    passfile = f"{cluster.datadir}.pgpass"
    assert url == f"postgresql://postgres@127.0.0.1:{cluster.port}/crashresume?passfile={passfile}"
    assert url == cluster.url
    assert cluster.is_running()
    assert one(url, "SELECT current_database()") == "crashresume"
    assert one(url, "SHOW fsync") == "on"
    assert one(url, "SHOW max_connections") == "200"
    assert one(url, "SHOW listen_addresses") == "127.0.0.1"
    pid = cluster.postmaster_pid()
    assert pid is not None
    if AS_ROOT:
        postgres = pwd.getpwnam(cluster.account.name)
        assert cluster.account.name in pgbinaries.SERVER_ACCOUNTS
        assert Path(f"/proc/{pid}").stat().st_uid == postgres.pw_uid != 0
        assert cluster.datadir.stat().st_uid == postgres.pw_uid
    assert (cluster.datadir / "server.log").read_text().strip()


def test_ensure_running_twice_reuses_the_running_server(cluster: LocalCluster) -> None:
    url = cluster.ensure_running()
    pid = cluster.postmaster_pid()

    assert cluster.ensure_running() == url
    # A second object, as a restarted CLI would build, finds the same server.
    assert LocalCluster(cluster.datadir).ensure_running() == url
    assert cluster.postmaster_pid() == pid


def test_a_stopped_cluster_restarts_on_the_same_data_and_port(cluster: LocalCluster) -> None:
    url = cluster.ensure_running()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE TABLE kept (v text)")
        conn.execute("INSERT INTO kept VALUES ('before the stop')")

    assert cluster.stop() is True
    assert not cluster.is_running()
    assert cluster.postmaster_pid() is None
    assert cluster.stop() is False
    assert cluster.url == url  # the persisted port

    assert cluster.ensure_running() == url
    assert one(url, "SELECT v FROM kept") == "before the stop"


@pytest.mark.parametrize("crash", ["immediate", "sigkill"])
def test_a_crashed_server_restarts_with_its_committed_data(
    cluster: LocalCluster, crash: str
) -> None:
    url = cluster.ensure_running()
    pid = cluster.postmaster_pid()
    assert pid is not None
    with psycopg.connect(url, autocommit=True) as idle:  # a backend that outlives a SIGKILL
        idle.execute("CREATE TABLE kept (v text)")
        idle.execute("INSERT INTO kept VALUES ('committed')")
        if crash == "immediate":
            assert cluster.stop("immediate") is True
        else:
            os.kill(pid, signal.SIGKILL)
            _wait_dead(pid)
            assert (cluster.datadir / "postmaster.pid").exists()  # stale now
            assert not cluster.is_running()

        assert cluster.ensure_running() == url
    assert cluster.postmaster_pid() not in (None, pid)
    assert one(url, "SELECT v FROM kept") == "committed"


def test_a_pidfile_naming_an_unrelated_live_process_is_cleared(cluster: LocalCluster) -> None:
    url = cluster.ensure_running()
    cluster.stop()
    # The old pid was reused by a live process that is not a postmaster: this test's process.
    (cluster.datadir / "postmaster.pid").write_text(f"{os.getpid()}\n{cluster.datadir}\n")

    assert cluster.ensure_running() == url


def test_concurrent_ensure_running_from_threads_starts_one_server(
    cluster: LocalCluster,
) -> None:
    barrier = threading.Barrier(4)
    urls: list[str] = []

    def start() -> None:
        barrier.wait()
        urls.append(LocalCluster(cluster.datadir).ensure_running())

    threads = [threading.Thread(target=start) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert len(urls) == 4
    assert len(set(urls)) == 1
    _assert_one_server(cluster)


def test_concurrent_ensure_running_from_processes_starts_one_server(
    cluster: LocalCluster,
) -> None:
    code = (
        "import sys; from pathlib import Path;"
        "from agent_runtime.localpg.pgcluster import LocalCluster;"
        "print(LocalCluster(Path(sys.argv[1])).ensure_running())"
    )
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code, str(cluster.datadir)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(3)
    ]
    outputs = [proc.communicate(timeout=120) for proc in procs]

    assert [proc.returncode for proc in procs] == [0, 0, 0], outputs
    assert len({out.strip() for out, _ in outputs}) == 1
    assert cluster.ensure_running() == outputs[0][0].strip()
    _assert_one_server(cluster)


def _assert_one_server(cluster: LocalCluster) -> None:
    postmasters = subprocess.run(
        ["pgrep", "-f", f"postgres -D {cluster.datadir}$"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.split()
    assert postmasters == [str(cluster.postmaster_pid())]
    log = (cluster.datadir / "server.log").read_text()
    assert log.count("database system is ready to accept connections") == 1


def test_a_taken_port_is_replaced_and_the_new_one_persisted(cluster: LocalCluster) -> None:
    cluster.ensure_running()
    old = cluster.port
    assert old is not None
    cluster.stop()
    with socket.socket() as squatter:
        squatter.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        squatter.bind(("127.0.0.1", old))
        squatter.listen()
        url = cluster.ensure_running()
        cluster.stop()
    new = cluster.port
    assert new not in (None, old)
    assert cluster.ensure_running() == url == cluster.url
    assert url.startswith(f"postgresql://postgres@127.0.0.1:{new}/crashresume?passfile=")


def test_stop_rejects_an_unknown_mode(cluster: LocalCluster) -> None:
    with pytest.raises(ValueError, match="smart, fast, immediate"):
        cluster.stop("abrupt")  # type: ignore[arg-type]


def test_a_non_empty_directory_that_is_not_a_cluster_is_refused(cluster: LocalCluster) -> None:
    cluster.datadir.mkdir()
    (cluster.datadir / "notes.txt").write_text("mine")

    with pytest.raises(ClusterError, match="not a PostgreSQL data directory"):
        cluster.ensure_running()
    assert (cluster.datadir / "notes.txt").read_text() == "mine"


@pytest.mark.skipif(not AS_ROOT, reason="only root must hand the directory to another user")
def test_a_parent_the_server_account_cannot_enter_gives_a_clear_error() -> None:
    blocked = Path(tempfile.mkdtemp(prefix="crashresume-blocked-"))  # mode 0700, root's
    try:
        with pytest.raises(ClusterError) as caught:
            LocalCluster(blocked / "home" / "pgdata").ensure_running()
        message = str(caught.value)
        assert f"cannot traverse {blocked} (mode 700)" in message
        assert "CRASHRESUME_HOME" in message
        assert not (blocked / "home").exists()
        assert blocked.stat().st_mode & 0o777 == 0o700  # nothing outside is chmod'ed
    finally:
        shutil.rmtree(blocked)
