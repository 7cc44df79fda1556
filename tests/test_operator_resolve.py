"""The operator against a run in doubt: show, the timeline, resolve, and a live owner.

A real agent process killed after a call leaves the run in doubt; ``show`` and the
timeline picture say so, and ``resolve`` re-sends under the same key. A live owner is
refused unless told to take over (and then fenced), a lease expires only when the
database clock passes it, and nothing in doubt means nothing claimed. Commands run as
real processes; time moves through ``cr_now()``'s skew, never by sleeping.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from agent_runtime.errors import EXIT_NOT_OWNER, EXIT_USAGE, LeaseLost
from agent_runtime.loop.lease import owner_token
from agent_runtime.store import clock
from agent_runtime.store.journal import Journal

from .fix_runtime import SERVER, Agent
from .operator_cli import ELSEWHERE, SVG, claimed, cli, one_error_line


def _svg(path: Path) -> tuple[ET.Element, list[str]]:
    root = ET.parse(path).getroot()
    return root, [t.text or "" for t in root.iter(f"{SVG}text")]


# -- a run left in doubt by a real crash ---------------------------------------------------


@pytest.mark.usefixtures("frozen_clock")
def test_an_after_call_crash_is_shown_in_doubt_then_resolved_under_the_same_key(
    agent: Agent, database_url: str, mock_servers: Any, tmp_path: Path
) -> None:
    crashed = agent.run("r1", CRASH_AT="after_call", CRASH_SEQ="1")
    assert crashed.code == 1, crashed.out

    shown = cli(database_url, "show", "r1")
    assert shown.code == 0, shown.stderr
    verdict = next(ln for ln in shown.stdout.splitlines() if ln.strip().startswith("seq 1: "))
    assert "intent written" in verdict and "no confirm" in verdict
    assert "re-sends under r1:1" in verdict and "gone" in verdict  # the crashed pid is gone
    assert "confirm   none: IN DOUBT" in shown.stdout

    data = cli(database_url, "show", "r1", "--json").json()
    assert [s["state"] for s in data["steps"]] == ["confirmed", "in_doubt"]
    assert data["steps"][1]["key"] == "r1:1" and data["steps"][1]["verdict"] == data["in_doubt"][0]
    assert data["run"]["owner_gone"] is True and data["run"]["lease_live"] is True

    listed = cli(database_url, "runs", "--in-doubt", "--json").json()
    assert [(r["id"], r["in_doubt"], r["steps_confirmed"]) for r in listed["runs"]] == [
        ("r1", 1, 1)
    ]

    picture = tmp_path / "doubt.svg"
    assert cli(database_url, "show", "r1", "--svg", str(picture)).code == 0
    root, _ = _svg(picture)
    doubtful = [g for g in root.iter(f"{SVG}g") if "in-doubt" in g.get("class", "")]
    assert [(g.get("data-kind"), g.get("data-key")) for g in doubtful] == [("intent", "r1:1")]

    remotes = {"CLOUD_URL": mock_servers.cloud_url, "MODEL_URL": mock_servers.model_url}
    resolved = cli(database_url, "resolve", "r1", **remotes)  # the owner provably died
    assert resolved.code == 0, resolved.stderr
    assert "seq 1  key r1:1  result db-" in resolved.stdout
    assert "remote already_done" in resolved.stdout
    assert mock_servers.resources("r1")["counts"] == {
        "servers": 1,
        "databases": 1,
        "dns_records": 0,
    }
    assert mock_servers.calls("r1") == 2  # resolving never asks the model

    after = cli(database_url, "show", "r1", "--json").json()
    assert after["in_doubt"] == []
    step = after["steps"][1]
    assert (step["state"], step["remote_status"], step["confirmed_by"]) == (
        "confirmed",
        "already_done",
        2,
    )
    assert step["replayed"] is True and step["resent"] is True
    assert [c["kind"] for c in after["claims"]] == ["first", "live"]
    assert after["run"]["owner"] is None and after["run"]["status"] == "running"
    text = cli(database_url, "show", "r1").stdout
    assert "nothing in doubt: every intent has its confirm" in text

    finished = agent.run("r1")  # resolve took no step; the run goes on from seq 2
    assert finished.code == 0, finished.out
    assert "steps=3 llm_calls=4" in finished.lines("done")[0]


def test_the_timeline_of_a_crash_and_resume_shows_each_step_the_death_and_the_takeover(
    agent: Agent, database_url: str, tmp_path: Path
) -> None:
    assert agent.run("r1", CRASH_AT="after_call", CRASH_SEQ="1").code == 1
    resumed = agent.run("r1")
    assert resumed.code == 0, resumed.out
    out = tmp_path / "timeline.svg"

    shown = cli(database_url, "show", "r1", "--svg", str(out))

    assert shown.code == 0, shown.stderr
    root, texts = _svg(out)
    assert root.tag == f"{SVG}svg" and root.get("data-run") == "r1"
    for label in ("decide 0", "decide 1", "decide 2", "decide 3", "confirm 1", "claim gen 2"):
        assert label in texts
    assert {"r1:0", "r1:1", "r1:2"} <= set(texts)
    events = {
        (g.get("data-kind"), g.get("data-seq"), g.get("data-generation"))
        for g in root.iter(f"{SVG}g")
        if g.get("data-kind")
    }
    assert ("crash", "", "1") in events  # generation 1 died after its last write
    assert ("takeover", "", "2") in events
    assert ("intent", "1", "1") in events and ("confirm", "1", "2") in events
    assert ("done", "", "2") in events
    lanes = [g.get("data-generation") for g in root.iter(f"{SVG}g") if g.get("class") == "lane"]
    assert lanes == ["1", "2"]
    assert "already_done" in texts and "same key r1:1" in texts
    assert not [g for g in root.iter(f"{SVG}g") if "in-doubt" in g.get("class", "")]

    nowhere = cli(database_url, "show", "r1", "--svg", str(tmp_path / "missing" / "t.svg"))
    assert nowhere.code == EXIT_USAGE
    assert "cannot write the timeline to " in one_error_line(nowhere, "ConfigError")


# -- live owners, the clock, resolve --------------------------------------------------------


@pytest.mark.usefixtures("frozen_clock")
def test_resolve_refuses_a_live_owner_unless_told_to_take_over_and_then_fences_it(
    agent: Agent, conn: Any, database_url: str, mock_servers: Any
) -> None:
    journal = Journal(conn)
    live = claimed(journal, "r2", owner_token())  # this test's own pid: alive
    journal.record_decision(live, 0, "create_server", dict(SERVER))
    journal.record_intent(live, 0)
    env = {"CLOUD_URL": mock_servers.cloud_url, "MODEL_URL": mock_servers.model_url}

    refused = cli(database_url, "resolve", "r2", **env)

    assert refused.code == EXIT_NOT_OWNER
    assert refused.stderr.strip().startswith("ERROR RunUnavailable error=")
    assert len(refused.stderr.strip().splitlines()) == 1
    assert "resolve r2 --takeover" in refused.stderr
    assert mock_servers.resources("r2")["total"] == 0

    taken = cli(database_url, "resolve", "r2", "--takeover", "--json", **env)

    assert taken.code == 0, taken.stderr
    assert taken.json()["resolved"][0]["key"] == "r2:0"
    assert taken.json()["resolved"][0]["remote_status"] == "created"  # never sent before
    assert taken.json()["in_doubt"] == []
    with pytest.raises(LeaseLost):
        journal.record_decision(live, 1, "create_server", dict(SERVER))


@pytest.mark.usefixtures("frozen_clock")
def test_show_says_the_lease_expired_once_the_database_clock_passes_it(
    conn: Any, database_url: str
) -> None:
    journal = Journal(conn)
    lease = claimed(journal, "x", ELSEWHERE)
    journal.record_decision(lease, 0, "create_server", dict(SERVER))
    journal.record_intent(lease, 0)

    live = cli(database_url, "show", "x").stdout
    assert "holds the lease until" in live and "will re-send under x:0" in live

    clock.advance(conn, 13)  # the owner stopped renewing; nobody sleeps
    expired = cli(database_url, "show", "x")

    verdict = next(ln.strip() for ln in expired.stdout.splitlines() if "seq 0: " in ln)
    assert verdict.startswith("seq 0: intent written ")
    assert "no confirm; the worker's lease expired " in verdict
    assert verdict.endswith("the next owner will re-send under x:0")
    assert "presumed dead" in expired.stdout


@pytest.mark.usefixtures("frozen_clock")
def test_resolve_with_nothing_in_doubt_claims_nothing(conn: Any, database_url: str) -> None:
    journal = Journal(conn)
    lease = claimed(journal, "calm", ELSEWHERE)
    journal.record_decision(lease, 0, "create_server", dict(SERVER))

    out = cli(database_url, "resolve", "calm")

    assert out.code == 0, out.stderr
    assert "nothing in doubt, nothing sent" in out.stdout
    run = journal.require_run("calm")
    assert (run.owner, run.generation) == (ELSEWHERE, 1)
