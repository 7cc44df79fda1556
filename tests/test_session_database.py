"""Where the test session's PostgreSQL comes from, when the obvious source is not there."""

from __future__ import annotations

import logging
import socket
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from agent_runtime.localpg.dbsource import docker_available

from . import fix_db

DOCKER_PONG = b"HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\r\nOK"


@pytest.fixture
def answering_docker_daemon(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A unix socket in DOCKER_HOST that answers every ``GET /_ping`` like a live daemon."""
    sockdir = Path(tempfile.mkdtemp(prefix="crashresume-docker-"))  # short: AF_UNIX limit
    path = sockdir / "docker.sock"
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    server.listen()
    server.settimeout(0.1)
    done = threading.Event()

    def serve() -> None:
        while not done.is_set():
            try:
                peer, _ = server.accept()
            except TimeoutError:
                continue
            with peer:
                peer.recv(4096)
                peer.sendall(DOCKER_PONG)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    monkeypatch.setenv("DOCKER_HOST", f"unix://{path}")
    yield path
    done.set()
    thread.join(timeout=5)
    server.close()
    path.unlink(missing_ok=True)
    sockdir.rmdir()


@pytest.fixture
def testcontainers_not_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every ``import testcontainers...`` raises ImportError, as on a machine without it."""
    names = {"testcontainers", "testcontainers.postgres", "testcontainers.community"}
    names |= {n for n in sys.modules if n.startswith("testcontainers.")}
    names.add("testcontainers.community.postgres")
    for name in names:
        monkeypatch.setitem(sys.modules, name, None)


@pytest.mark.usefixtures("answering_docker_daemon", "testcontainers_not_installed")
def test_a_docker_daemon_without_testcontainers_falls_back_to_a_local_cluster_with_one_line(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.delenv("DATABASE_URL", raising=False)
    monkeypatch.delenv("CRASHRESUME_NO_DOCKER", raising=False)
    assert docker_available()  # the daemon answers, so the container path is taken
    with pytest.raises(ImportError):
        import testcontainers  # noqa: F401

    with caplog.at_level(logging.DEBUG, logger=fix_db.__name__):
        with fix_db.session_source() as source:
            assert source.kind == "local" and source.cluster is not None
            with psycopg.connect(source.url, autocommit=True) as conn:
                assert conn.execute("SELECT 1").fetchone() == (1,)
        assert not source.cluster.datadir.exists()  # the throwaway cluster is gone again

    lines = [r.getMessage() for r in caplog.records if r.name == fix_db.__name__]
    assert len(lines) == 1, lines
    assert lines[0].startswith("db-container-skipped reason=testcontainers-not-installed")
    assert "fallback=local-cluster" in lines[0]
