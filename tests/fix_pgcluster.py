"""Throwaway local PostgreSQL clusters for the cluster's own tests (test_pgcluster.py,
test_pgsources.py): ``make_cluster`` and ``cluster`` make them in directories the server
account can enter and remove them after the test; :func:`servers_made_here` tells which
live servers came from them, so each module can check that none outlives it.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest

from agent_runtime.localpg.pgbinaries import BIN_CACHE, server_account
from agent_runtime.localpg.pgcluster import THROWAWAY_PREFIX, LocalCluster

MakeCluster = Callable[..., LocalCluster]
MADE_HERE: list[str] = []  # directories the clusters of this session's fixtures live in


def servers_made_here() -> dict[int, str]:
    """Live servers (by `pgrep -u <account> -f crashresume-pg`) in these fixtures'
    directories. Other pytest sessions on the machine may run their own clusters meanwhile:
    not counted."""
    done = subprocess.run(
        ["pgrep", "-u", server_account().name, "-f", THROWAWAY_PREFIX],
        capture_output=True,
        text=True,
        check=False,
    )
    found = {int(pid): _cmdline(int(pid)) for pid in done.stdout.split()}
    return {pid: cmd for pid, cmd in found.items() if any(d in cmd for d in MADE_HERE)}


def no_server_left() -> None:
    """Fails if a server made here is still alive 5 s from now (a module's teardown)."""
    deadline = time.monotonic() + 5
    while (leaked := servers_made_here()) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not leaked


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def traversable_tmpdir() -> Path:
    root = Path(tempfile.mkdtemp(prefix=THROWAWAY_PREFIX))
    root.chmod(0o755)  # ours: the server account must be able to enter it
    MADE_HERE.append(f"{root}/")
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
        roots.append(traversable_tmpdir())
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
    """One cluster, not yet created (a module may define its own ``cluster``)."""
    return make_cluster()


def one(url: str, query: str) -> object:
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(query).fetchone()
    assert row is not None
    return row[0]
