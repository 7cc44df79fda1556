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

    shown = result.stdout
    call_run, decide_run = (
        _run_id_of(shown, f"$ CRASH_AT={point} CRASH_SEQ=0 RUN_ID=")
        for point in ("after_call", "after_decide")
    )
    # after_call: the server exists in the cloud before the restart re-sends the call.
    exists = f"before the restart the cloud holds 1 server for run {call_run}"
    assert exists in shown
    assert shown.index(exists) < shown.index(f"$ RUN_ID={call_run} python -m agent_runtime")
    # It ends with the operator commands for its own runs, and they work as printed.
    assert shown.rstrip().splitlines()[-3:] == [
        "  python -m agent_runtime runs",
        f"  python -m agent_runtime show {call_run}",
        f"  python -m agent_runtime show {decide_run}",
    ]
    listed = _cli("runs", env=env, timeout=60)
    assert listed.returncode == 0 and call_run in listed.stdout and decide_run in listed.stdout
    for run_id in (call_run, decide_run):
        one = _cli("show", run_id, env=env, timeout=60)
        assert one.returncode == 0 and one.stdout.startswith(f"run {run_id}  done"), one.stdout


def _run_id_of(out: str, prefix: str) -> str:
    match = re.search(re.escape(prefix) + r"(\S+) python -m agent_runtime", out)
    assert match is not None, out
    return match[1]


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
    port = re.search(r":(\d+)/", started.stdout)
    assert port is not None, started.stdout
    assert stopped.stdout.strip() == (
        f"stopped the local cluster in {home / 'pgdata'} (port {port[1]})"
    )
    again = _cli("db", "stop", env=env)
    assert again.stdout.strip() == f"no local cluster was running in {home / 'pgdata'}"
    assert mock_servers.resources("local")["total"] == 3


@pytest.mark.parametrize("action", ["start", "url"])
def test_db_start_and_url_with_database_url_set_say_nothing_local_is_started(
    action: str, home: Path
) -> None:
    configured = "postgresql://app:s3cret@127.0.0.1:1/agents"
    env = {**os.environ, "DATABASE_URL": configured, "CRASHRESUME_HOME": str(home / "h")}
    result = _cli("db", action, env=env, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout == configured + "\n"  # what the CLI uses, for $(... db url)
    note = result.stderr.strip()
    assert "DATABASE_URL is set" in note and "no local cluster" in note
    assert "postgresql://app:***@127.0.0.1:1/agents" in note
    assert "s3cret" not in note and len(note.splitlines()) == 1
    assert not (home / "h").exists()  # nothing was initialised or started


def test_db_stop_says_when_no_local_cluster_was_running(home: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    env["CRASHRESUME_HOME"] = str(home)
    result = _cli("db", "stop", env=env, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"no local cluster was running in {home / 'pgdata'}"


def test_db_stop_with_database_url_set_says_that_database_is_not_touched(home: Path) -> None:
    env = {**os.environ, "DATABASE_URL": "postgresql://app:s3cret@127.0.0.1:1/agents"}
    env["CRASHRESUME_HOME"] = str(home)
    result = _cli("db", "stop", env=env, timeout=60)
    assert result.returncode == 0, result.stderr
    assert f"no local cluster was running in {home / 'pgdata'}" in result.stdout
    assert "postgresql://app:***@127.0.0.1:1/agents" in result.stdout
    assert "s3cret" not in result.stdout + result.stderr


def test_an_unreachable_database_keeps_its_cause_in_the_one_error_line(home: Path) -> None:
    env = {**os.environ, "DATABASE_URL": "postgresql://app:s3cret@127.0.0.1:1/agents"}
    result = _cli("runs", env=env, timeout=60)
    assert result.returncode == 4, result.stderr
    errors = [ln for ln in result.stderr.splitlines() if ln.startswith("ERROR")]
    assert len(errors) == 1, result.stderr
    assert "cannot reach the database at 127.0.0.1:1/agents" in errors[0]
    assert "Connection refused" in errors[0]
    assert "s3cret" not in result.stderr
