"""One failure, one ERROR line: the worker that stopped on it says what it did to the run,
and the process edge (``cli.main``, the supervisor's child) adds no second line."""

from __future__ import annotations

from typing import Any

import httpx

from agent_runtime.errors import EXIT_FAILED, EXIT_RETRY_LATER, EXIT_USAGE

from .fix_runtime import Agent


def _errors(out: str) -> list[str]:
    return [ln for ln in out.splitlines() if ln.startswith("ERROR")]


def test_a_resumable_failure_prints_one_error_line_with_the_run_and_the_reason(
    agent: Agent, mock_servers: Any
) -> None:
    mock_servers.set_cloud_faults(fail_before=100)
    result = agent.run("t-once", TOOL_TIMEOUT="1")
    assert result.code == EXIT_RETRY_LATER, result.out
    (line,) = _errors(result.out)
    assert line.startswith("ERROR stopped run=t-once resumable=yes reason='RemoteUnavailable: ")
    assert "the cloud did not answer key=t-once:0" in line


def test_a_permanent_failure_prints_one_error_line_too(agent: Agent, mock_servers: Any) -> None:
    taken = httpx.post(  # another client already used the run's first key: the cloud says 409
        f"{mock_servers.cloud_url}/v1/servers",
        json={"name": "other", "size": "large", "region": "elsewhere"},
        headers={"Idempotency-Key": "t-taken:0"},
        timeout=10,
    )
    assert taken.status_code == 201
    result = agent.run("t-taken")
    assert result.code == EXIT_FAILED, result.out
    (line,) = _errors(result.out)
    assert line.startswith("ERROR failed run=t-taken reason='RemoteRejected: ")
    assert "key_conflict" in line


def test_an_error_before_any_run_is_held_still_gets_its_one_line(
    agent: Agent, mock_servers: Any
) -> None:
    result = agent.run("t-badcrash", CRASH_AT="nowhere")
    assert result.code == EXIT_USAGE, result.out
    (line,) = _errors(result.out)
    assert line.startswith("ERROR ConfigError error=") and "unknown CRASH_AT='nowhere'" in line
