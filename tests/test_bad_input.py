"""Bad input: each gets one clear error, and nothing is lost or half-written."""

from __future__ import annotations

import signal
from typing import Any

import httpx
import pytest

from agent_runtime import config
from agent_runtime.crash import CRASH_POINTS
from agent_runtime.errors import EXIT_FAILED, EXIT_RETRY_LATER, EXIT_USAGE
from agent_runtime.store import clock, db
from agent_runtime.store.journal import Journal

from .fix_runtime import Agent, cloud_key, journal_rows
from .fix_supervisor import SupervisorProcess


def _past_the_backoff(agent: Agent) -> None:
    """A run stopped by a resumable error is not claimable before its backoff: move the
    clock past the longest one instead of waiting."""
    with db.connection(agent.database_url) as conn:
        clock.advance(conn, config.RUN_BACKOFF_CAP)


def _finishes_cleanly_afterwards(agent: Agent, mock_servers: Any, run_id: str) -> None:
    _past_the_backoff(agent)
    again = agent.run(run_id)
    assert again.code == 0, again.out
    assert mock_servers.resources(run_id)["total"] == 3


def test_an_unknown_crash_point_is_refused_before_anything_runs(
    agent: Agent, conn: Any, mock_servers: Any
) -> None:
    result = agent.run("t-bad-crash", CRASH_AT="after_lunch")
    assert result.code == EXIT_USAGE
    assert "after_lunch" in result.out
    for name in CRASH_POINTS:
        assert name in result.out
    assert conn.execute("SELECT count(*) AS n FROM runs").fetchone()["n"] == 0
    assert mock_servers.calls("t-bad-crash") == 0


def test_a_crash_seq_that_is_not_a_number_is_refused(agent: Agent, conn: Any) -> None:
    result = agent.run("t-bad-seq", CRASH_AT="after_call", CRASH_SEQ="two")
    assert result.code == EXIT_USAGE
    assert "CRASH_SEQ must be a whole number" in result.out


@pytest.mark.usefixtures("frozen_clock")
def test_a_malformed_model_answer_stops_the_run_with_nothing_journaled(
    agent: Agent, conn: Any, mock_servers: Any
) -> None:
    mock_servers.set_model_faults(malformed=1)
    result = agent.run("t-malformed")
    assert result.code == EXIT_RETRY_LATER, result.out
    assert "MalformedAnswer" in result.out
    assert journal_rows(conn, "t-malformed") == {"decisions": [], "calls": []}
    run = conn.execute(
        "SELECT status, owner, failure FROM runs WHERE id = 't-malformed'"
    ).fetchone()
    assert run["status"] == "running" and run["owner"] is None
    assert "MalformedAnswer" in run["failure"]
    _finishes_cleanly_afterwards(agent, mock_servers, "t-malformed")


@pytest.mark.parametrize(
    ("fault", "error"), [("unknown_tool", "UnknownTool"), ("invalid_args", "InvalidArguments")]
)
def test_a_refused_call_is_journaled_shown_to_the_model_and_the_run_goes_on(
    agent: Agent, conn: Any, mock_servers: Any, fault: str, error: str
) -> None:
    mock_servers.set_model_faults(**{fault: 1})
    result = agent.run("t-refused")
    assert result.code == 0, result.out
    (line,) = result.lines("rejected")
    assert line.startswith("WARNING rejected run=t-refused seq=0 tool=") and "llm_calls=1" in line
    rows = journal_rows(conn, "t-refused")
    assert [d["llm_call"] for d in rows["decisions"]] == [1, 2, 3, 4, 5]  # every paid answer
    refused = rows["calls"][0]
    assert (refused["state"], refused["remote_status"]) == ("failed", "rejected")
    assert refused["result"]["error"] == error
    assert mock_servers.calls("t-refused") == 5  # the bad answer bought once, never again
    assert mock_servers.resources("t-refused")["total"] == 3
    again = agent.run("t-refused")  # a replay finds nothing to ask
    assert again.code == 0 and mock_servers.calls("t-refused") == 5, again.out


def test_a_cloud_500_before_acting_is_retried_under_the_same_key(
    agent: Agent, conn: Any, mock_servers: Any
) -> None:
    mock_servers.set_cloud_faults(fail_before=2)
    result = agent.run("t-500", TOOL_TIMEOUT="5")
    assert result.code == 0, result.out
    resources = mock_servers.resources("t-500")
    assert resources["total"] == 3
    assert cloud_key(mock_servers, "t-500:0")["requests"] == 3
    assert "remote=created" in result.lines("confirmed")[0]


def test_a_cloud_that_acts_then_times_out_ends_with_one_resource(
    agent: Agent, conn: Any, mock_servers: Any
) -> None:
    mock_servers.set_cloud_faults(drop_after=1, hang=3.0)
    result = agent.run("t-timeout", TOOL_TIMEOUT="0.5")
    assert result.code == 0, result.out
    assert mock_servers.resources("t-timeout")["counts"]["servers"] == 1
    assert cloud_key(mock_servers, "t-timeout:0")["requests"] == 2
    assert "remote=already_done" in result.lines("confirmed")[0]


@pytest.mark.usefixtures("frozen_clock")
def test_a_cloud_that_never_answers_leaves_the_intent_for_the_restart(
    agent: Agent, conn: Any, mock_servers: Any
) -> None:
    mock_servers.set_cloud_faults(fail_before=100)
    result = agent.run("t-down", TOOL_TIMEOUT="1")
    assert result.code == EXIT_RETRY_LATER, result.out
    assert "RemoteUnavailable" in result.out
    calls = journal_rows(conn, "t-down")["calls"]
    assert [c["state"] for c in calls] == ["intent"]
    mock_servers.set_cloud_faults(fail_before=0)
    _past_the_backoff(agent)
    again = agent.run("t-down")
    assert again.code == 0, again.out
    assert "resending run=t-down seq=0" in again.out
    assert mock_servers.resources("t-down")["total"] == 3


def test_an_unreachable_database_is_one_clear_line_and_writes_nothing(
    agent: Agent, mock_servers: Any
) -> None:
    agent.database_url = "postgresql://postgres@127.0.0.1:1/crashresume"
    result = agent.run("t-nodb")
    assert result.code == EXIT_RETRY_LATER
    errors = [ln for ln in result.out.splitlines() if ln.startswith("ERROR")]
    assert len(errors) == 1 and "cannot reach the database at 127.0.0.1:1/crashresume" in errors[0]
    assert "Connection refused" in errors[0]  # the cause, not only psycopg's hint line
    assert "Traceback" not in result.out
    assert mock_servers.calls("t-nodb") == 0


def test_a_cloud_4xx_fails_the_run_with_the_reason_and_keeps_the_journal(
    agent: Agent, conn: Any, mock_servers: Any
) -> None:
    # Someone already used this run's first key for other arguments: the cloud says 409.
    squatter = httpx.post(
        f"{mock_servers.cloud_url}/v1/servers",
        json={"name": "other", "size": "large", "region": "elsewhere"},
        headers={"Idempotency-Key": "t-409:0"},
        timeout=10,
    )
    assert squatter.status_code == 201
    result = agent.run("t-409")
    assert result.code == EXIT_FAILED, result.out
    assert "RemoteRejected" in result.out and "key_conflict" in result.out
    run = conn.execute("SELECT status, failure FROM runs WHERE id = 't-409'").fetchone()
    assert run["status"] == "failed" and "key_conflict" in run["failure"]
    rows = journal_rows(conn, "t-409")
    assert [d["tool"] for d in rows["decisions"]] == ["create_server"]
    assert [c["state"] for c in rows["calls"]] == ["intent"]  # kept, for the operator to see
    again = agent.run("t-409")
    assert again.code != 0 and "failed" in again.out


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("CLOUD_URL", "::::"),
        ("MODEL_URL", "::::"),
        ("CLOUD_URL", "not-a-url"),
        ("MODEL_URL", "not-a-url"),
        ("CLOUD_URL", "127.0.0.1:8001"),
        ("MODEL_URL", "http://"),
    ],
)
def test_a_remote_url_that_does_not_parse_is_refused_before_anything_runs(
    variable: str, value: str, agent: Agent, conn: Any, mock_servers: Any
) -> None:
    result = agent.run("t-bad-url", **{variable: value})
    assert result.code == EXIT_USAGE, result.out
    assert result.out.strip().splitlines() == [_one_error(result.out)]
    assert variable in result.out and value in result.out
    assert "Traceback" not in result.out
    assert conn.execute("SELECT count(*) AS n FROM runs").fetchone()["n"] == 0
    assert mock_servers.calls("t-bad-url") == 0
    assert mock_servers.resources("t-bad-url")["total"] == 0


@pytest.mark.parametrize(("variable", "value"), [("CLOUD_URL", "::::"), ("MODEL_URL", "not-a-url")])
def test_the_supervisor_refuses_a_remote_url_that_does_not_parse_and_claims_nothing(
    variable: str, value: str, agent: Agent, conn: Any, mock_servers: Any
) -> None:
    Journal(conn).create_run("t-sup-bad-url")
    sup = SupervisorProcess({**agent.env("unused"), variable: value}, "--poll", "0.1", "--once")
    try:
        code = sup.wait()
    finally:
        if sup.proc.poll() is None:
            sup.stop(signal.SIGKILL)
    assert code == EXIT_USAGE, sup.text
    error = _one_error(sup.text)
    assert variable in error and value in error
    assert "Traceback" not in sup.text
    run = conn.execute(
        "SELECT status, generation, attempts, owner FROM runs WHERE id = 't-sup-bad-url'"
    ).fetchone()
    assert run == {"status": "pending", "generation": 0, "attempts": 0, "owner": None}
    claims = conn.execute("SELECT count(*) AS n FROM run_claims WHERE run_id = 't-sup-bad-url'")
    assert claims.fetchone()["n"] == 0
    assert mock_servers.calls("t-sup-bad-url") == 0


def _one_error(out: str) -> str:
    errors = [ln for ln in out.splitlines() if ln.startswith("ERROR")]
    assert len(errors) == 1, out
    return errors[0]
