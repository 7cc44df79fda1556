"""A failed run can be revived: ``retry`` puts it back to pending, keeps the failure in its
history, and refuses what it must not touch. A wrong endpoint (404/405) stops a run
resumably. Real processes throughout (the CLI, a supervisor, the mocks under uvicorn);
time moves through ``cr_now()``.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from agent_runtime import config
from agent_runtime.errors import EXIT_NOT_OWNER, EXIT_USAGE
from agent_runtime.store import clock
from agent_runtime.store.journal import Journal

from .fix_runtime import SERVER, Agent, cloud_key, journal_rows
from .operator_cli import ELSEWHERE, SVG, cli

FAST = ("--poll", "0.1", "--lease", "12", "--heartbeat", "3")


def _errors(text: str) -> list[str]:
    return [ln for ln in text.splitlines() if ln.startswith("ERROR")]


def _row(conn: Any, run_id: str) -> dict[str, Any]:
    row = conn.execute(
        "SELECT status, owner, generation, attempts, failure, lease_expires_at,"
        " lease_expires_at > cr_now() AS waiting FROM runs WHERE id = %s",
        (run_id,),
    ).fetchone()
    assert row is not None
    return dict(row)


@pytest.mark.usefixtures("frozen_clock")
def test_a_run_failed_by_a_wrong_cloud_url_finishes_once_the_url_is_fixed_and_retried(
    agent: Agent, conn: Any, database_url: str, mock_servers: Any, supervisors: Any, tmp_path: Path
) -> None:
    wrong = {"CLOUD_URL": mock_servers.model_url}  # the model answers POST /v1/servers: 404

    stopped = agent.run("misdirected", **wrong)

    assert stopped.code == EXIT_USAGE, stopped.out
    (line,) = _errors(stopped.out)
    assert line.startswith("ERROR stopped run=misdirected resumable=yes reason='WrongEndpoint: ")
    assert "HTTP 404" in line and "CLOUD_URL does not point at the cloud" in line
    run = _row(conn, "misdirected")
    assert run["status"] == "running" and run["owner"] is None  # resumable, not failed
    assert [c["state"] for c in journal_rows(conn, "misdirected")["calls"]] == ["intent"]

    # Nobody notices the mistake: the supervisor (same mistake) tries again, then gives up.
    clock.advance(conn, config.RUN_BACKOFF_CAP)
    give_up = ("--max-attempts", "2", "--give-up-after", "0", "--once")
    sup = supervisors(*FAST, *give_up, **wrong)
    assert sup.wait() == 0, sup.text
    run = _row(conn, "misdirected")
    assert run["status"] == "failed", sup.text
    assert run["failure"].startswith("gave up after 2 attempts in ")
    assert "WrongEndpoint" in run["failure"]
    refused = agent.run("misdirected")
    assert refused.code == EXIT_NOT_OWNER
    assert "`python -m agent_runtime retry misdirected` puts it back to pending" in refused.out

    clock.advance(conn, 1)  # the frozen clock: the timeline orders these by time
    retried = cli(database_url, "retry", "misdirected")

    assert retried.code == 0, retried.stderr
    assert retried.stdout.startswith("run misdirected is pending again (was failed: gave up ")
    assert "in doubt, re-sent under the same keys by the next owner: misdirected:0" in (
        retried.stdout
    )
    run = _row(conn, "misdirected")
    assert (run["status"], run["attempts"], run["failure"], run["lease_expires_at"]) == (
        "pending",
        0,
        None,
        None,
    )

    clock.advance(conn, 1)
    fixed = agent.run("misdirected")  # the right CLOUD_URL, and no waiting

    assert fixed.code == 0, fixed.out
    assert mock_servers.resources("misdirected")["counts"] == {
        "servers": 1,
        "databases": 1,
        "dns_records": 1,
    }
    assert cloud_key(mock_servers, "misdirected:0")["requests"] == 1  # the 404s went elsewhere
    assert journal_rows(conn, "misdirected")["calls"][0]["remote_status"] == "created"
    assert "resending run=misdirected seq=0 key=misdirected:0" in fixed.out
    assert mock_servers.calls("misdirected") == 4  # the decision was replayed, never re-asked

    shown = cli(database_url, "show", "misdirected")
    assert shown.code == 0, shown.stderr
    history = shown.stdout.split("retried by an operator\n", 1)[1]
    assert "was failed since " in history and "after 2 attempt(s): gave up after 2" in history
    assert "WrongEndpoint" in history
    data = cli(database_url, "show", "misdirected", "--json").json()
    (past,) = data["retries"]
    assert past["previous_status"] == "failed" and "WrongEndpoint" in past["previous_failure"]
    kinds = [e["kind"] for e in data["events"]]
    assert kinds.index("failed") < kinds.index("retried") < kinds.index("done")
    picture = tmp_path / "retried.svg"
    assert cli(database_url, "show", "misdirected", "--svg", str(picture)).code == 0
    marks = {g.get("data-kind") for g in ET.parse(picture).getroot().iter(f"{SVG}g")}
    assert {"failed", "retried", "done"} <= marks


def test_a_wrong_model_url_stops_the_run_resumably_with_nothing_journaled(
    agent: Agent, conn: Any, mock_servers: Any
) -> None:
    result = agent.run("wrong-model", MODEL_URL=mock_servers.cloud_url)  # no /v1/decide: 404
    assert result.code == EXIT_USAGE, result.out
    (line,) = _errors(result.out)
    assert "WrongEndpoint" in line and "MODEL_URL does not point at the model" in line
    assert journal_rows(conn, "wrong-model") == {"decisions": [], "calls": []}
    assert _row(conn, "wrong-model")["status"] == "running"


@pytest.mark.usefixtures("frozen_clock")
def test_retry_ends_the_backoff_of_a_run_that_is_not_failed(
    agent: Agent, conn: Any, database_url: str, mock_servers: Any
) -> None:
    mock_servers.set_model_faults(malformed=1)
    assert agent.run("waiting", RUN_BACKOFF="60").code != 0
    assert _row(conn, "waiting")["waiting"]

    retried = cli(database_url, "retry", "waiting", "--json")

    assert retried.code == 0, retried.stderr
    data = retried.json()
    assert (data["status"], data["previous_status"], data["previous_attempts"]) == (
        "running",
        "running",
        1,
    )
    assert "MalformedAnswer" in data["previous_failure"]
    again = agent.run("waiting")  # no clock moved: the wait is over
    assert again.code == 0, again.out


def test_resolve_acts_at_once_even_on_a_run_waiting_out_a_backoff(
    agent: Agent, conn: Any, database_url: str, mock_servers: Any
) -> None:
    mock_servers.set_cloud_faults(fail_before=100)
    down = agent.run("doubtful", TOOL_TIMEOUT="1", RUN_BACKOFF="60")
    assert down.code != 0, down.out
    assert _row(conn, "doubtful")["waiting"]
    mock_servers.set_cloud_faults(fail_before=0)
    remotes = {"CLOUD_URL": mock_servers.cloud_url, "MODEL_URL": mock_servers.model_url}

    resolved = cli(database_url, "resolve", "doubtful", **remotes)

    assert resolved.code == 0, resolved.stderr
    assert "seq 0  key doubtful:0" in resolved.stdout and "remote created" in resolved.stdout
    assert not _row(conn, "doubtful")["waiting"]  # and claimable at once afterwards
    assert agent.run("doubtful").code == 0


def _made(journal: Journal, database_url: str) -> None:
    """A done run, a cancelled one, one a live worker holds, and a parked one."""
    journal.create_run("done-run")
    done = journal.claim("done-run", "w:1:x", 12.0)
    assert done is not None
    journal.record_decision(done, 0, "done", {})
    journal.finish(done)
    journal.create_run("cancelled-run")
    assert cli(database_url, "cancel", "cancelled-run", "--reason", "not wanted").code == 0
    journal.create_run("held-run")
    held = journal.claim("held-run", ELSEWHERE, 12.0)
    assert held is not None
    journal.record_decision(held, 0, "create_server", dict(SERVER))
    journal.create_run("parked-run")
    parked = journal.claim("parked-run", "w:2:x", 12.0)
    assert parked is not None
    journal.record_decision(parked, 0, "create_server", dict(SERVER))
    journal.record_intent(parked, 0, "once")
    journal.park(parked, "a once call is in doubt")


@pytest.mark.parametrize(
    ("run_id", "code", "message"),
    [
        ("done-run", EXIT_NOT_OWNER, "run done-run is done: there is nothing to retry"),
        ("cancelled-run", EXIT_NOT_OWNER, "a cancelled run stays cancelled"),
        ("held-run", EXIT_NOT_OWNER, "a worker that is alive as far as its lease says"),
        ("parked-run", EXIT_NOT_OWNER, "needs attention: a call nothing can tell the outcome"),
        ("no-such-run", EXIT_USAGE, "no run with id 'no-such-run'"),
        ("bad\nid", EXIT_USAGE, "is refused: it holds a control character (U+000A)"),
    ],
)
@pytest.mark.usefixtures("frozen_clock")
def test_retry_refuses_what_it_must_not_revive_and_changes_nothing(
    run_id: str, code: int, message: str, conn: Any, database_url: str
) -> None:
    _made(Journal(conn), database_url)
    before = conn.execute("SELECT * FROM runs ORDER BY id").fetchall()

    out = cli(database_url, "retry", run_id)

    assert out.code == code, out.stderr
    (line,) = _errors(out.stderr)
    assert message in line
    assert out.stdout == ""
    assert conn.execute("SELECT * FROM runs ORDER BY id").fetchall() == before
    assert conn.execute("SELECT count(*) AS n FROM run_retries").fetchone()["n"] == 0
