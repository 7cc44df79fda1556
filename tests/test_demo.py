"""The README's demo command, and the CLI's own persistent cluster, as a new user runs them."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .fix_runtime import Agent


def _cli(*args: str, env: dict[str, str], timeout: float = 180) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agent_runtime", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as stat:
        return stat.read().rsplit(")", 1)[1].split()[0] != "Z"


@pytest.fixture
def home() -> Iterator[Path]:
    """A CRASHRESUME_HOME the unprivileged server account can reach (not under /root)."""
    path = Path(tempfile.mkdtemp(prefix="crashresume-home-"))
    os.chmod(path, 0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_the_demo_crashes_twice_resumes_twice_and_leaves_no_mock_running(
    agent: Agent, home: Path, conn: Any
) -> None:
    env = {**os.environ, "DATABASE_URL": agent.database_url, "CRASHRESUME_HOME": str(home)}
    result = _cli("demo", env=env)
    out = result.stdout + result.stderr
    assert result.returncode == 0, out
    assert "!!! CRASH_AT=after_call seq=0 -- os._exit(1)" in out
    assert "!!! CRASH_AT=after_decide seq=0 -- os._exit(1)" in out
    assert re.search(r"confirmed run=demo-after-call-\S+ seq=0 .* remote=already_done", out)
    assert re.search(r'replayed run=demo-after-decide-\S+ seq=0 .*"srv-1".* llm_calls=1', out)
    assert "all promises held" in out
    mock_pids = [int(p) for p in re.findall(r"mock \w+ starting pid=(\d+)", out)]
    assert len(mock_pids) == 2
    assert not [pid for pid in mock_pids if _alive(pid)]


def test_the_cli_starts_its_own_cluster_from_an_empty_home_and_stops_it(
    home: Path, mock_servers: Any
) -> None:
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    env.update(
        CRASHRESUME_HOME=str(home),
        CLOUD_URL=mock_servers.cloud_url,
        MODEL_URL=mock_servers.model_url,
    )
    mock_servers.reset()
    try:
        started = _cli("db", "start", env=env)
        assert started.returncode == 0, started.stderr
        assert started.stdout.startswith("postgresql://")
        crashed = _cli("run", "--run-id", "local", env={**env, "CRASH_AT": "after_call"})
        assert crashed.returncode == 1, crashed.stderr
        resumed = _cli("run", "--run-id", "local", env=env)
        assert resumed.returncode == 0, resumed.stderr
        assert "remote=already_done" in resumed.stderr
        status = _cli("db", "status", env=env)
        assert status.returncode == 0 and '"running": true' in status.stdout
    finally:
        stopped = _cli("db", "stop", env=env)
    assert stopped.returncode == 0, stopped.stderr
    assert mock_servers.resources("local")["total"] == 3
