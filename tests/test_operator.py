"""The operator view against a real PostgreSQL: runs, show, resolve, cancel, the timeline.

Commands run as real processes (``python -m agent_runtime ...``); runs are made
either by real agent processes killed at a crash point or in-process through the
journal, and time moves through ``cr_now()``'s skew, never by sleeping.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from psycopg import sql
from psycopg.conninfo import make_conninfo

from agent_runtime.config import Settings
from agent_runtime.crash import CrashPlan
from agent_runtime.errors import EXIT_NOT_OWNER, EXIT_RETRY_LATER, EXIT_USAGE, LeaseLost
from agent_runtime.loop.lease import owner_token
from agent_runtime.loop.worker import Worker
from agent_runtime.operator import cancel_run
from agent_runtime.store import clock, db
from agent_runtime.store.journal import Journal
from agent_runtime.store.records import Lease
from mock_remotes import Cloud, Model, cloud_transport, model_transport

from .fix_runtime import Agent

SVG = "{http://www.w3.org/2000/svg}"
CLI_TIMEOUT = 60  # seconds one operator command may take
SERVER = {"name": "srv-1", "size": "small", "region": "local-1"}
ELSEWHERE = "another-host:4242:cafe0001"  # an owner on another host: never provably dead


@dataclass(frozen=True)
class Out:
    code: int
    stdout: str
    stderr: str

    def json(self) -> Any:
        return json.loads(self.stdout)


def cli(database_url: str, *args: str, **env: str) -> Out:
    """``python -m agent_runtime ARGS`` as a real process against ``database_url``."""
    full = {k: v for k, v in os.environ.items() if k not in ("CRASH_AT", "CRASH_SEQ", "RUN_ID")}
    full.update(DATABASE_URL=database_url, **env)
    proc = subprocess.run(
        [sys.executable, "-m", "agent_runtime", *args],
        env=full,
        capture_output=True,
        text=True,
        timeout=CLI_TIMEOUT,
    )
    return Out(proc.returncode, proc.stdout, proc.stderr)


def _claimed(journal: Journal, run_id: str, owner: str) -> Lease:
    journal.create_run(run_id)
    lease = journal.claim(run_id, owner, 12.0)
    assert lease is not None
    return lease


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
    assert "cannot write the timeline to " in _one_error_line(nowhere, "ConfigError")


# -- live owners, the clock, resolve --------------------------------------------------------


@pytest.mark.usefixtures("frozen_clock")
def test_resolve_refuses_a_live_owner_unless_told_to_take_over_and_then_fences_it(
    agent: Agent, conn: Any, database_url: str, mock_servers: Any
) -> None:
    journal = Journal(conn)
    live = _claimed(journal, "r2", owner_token())  # this test's own pid: alive
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
    lease = _claimed(journal, "x", ELSEWHERE)
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
    lease = _claimed(journal, "calm", ELSEWHERE)
    journal.record_decision(lease, 0, "create_server", dict(SERVER))

    out = cli(database_url, "resolve", "calm")

    assert out.code == 0, out.stderr
    assert "nothing in doubt, nothing sent" in out.stdout
    run = journal.require_run("calm")
    assert (run.owner, run.generation) == (ELSEWHERE, 1)


# -- runs -----------------------------------------------------------------------------------


@pytest.mark.usefixtures("frozen_clock")
def test_runs_lists_owner_lease_counts_and_filters_by_status(conn: Any, database_url: str) -> None:
    journal = Journal(conn)
    journal.create_run("a-pending")
    busy = _claimed(journal, "b-running", ELSEWHERE)
    journal.record_decision(busy, 0, "create_server", dict(SERVER))
    journal.record_confirm(busy, journal.record_intent(busy, 0), {"id": "i-1"}, "created")
    journal.record_decision(busy, 1, "create_database", {"name": "db-2"})
    journal.record_intent(busy, 1)
    done = _claimed(journal, "c-done", ELSEWHERE)
    journal.record_decision(done, 0, "done", {})
    journal.finish(done)
    journal.create_run("d-cancelled")
    cancel_run(conn, "d-cancelled", "not needed")

    table = cli(database_url, "runs")
    assert table.code == 0, table.stderr
    lines = table.stdout.splitlines()
    assert lines[0].split()[:6] == ["RUN", "STATUS", "GEN", "STEPS", "LLM", "DOUBT"]
    row = next(ln for ln in lines if ln.startswith("b-running"))
    assert ELSEWHERE in row and "expires " in row
    assert lines[-2] == "4 runs"
    assert lines[-1].startswith("waiting for a worker of agent 'provisioning': 1 run(s), the ")

    running = cli(database_url, "runs", "--status", "running", "--json").json()
    (b,) = running["runs"]
    assert (b["id"], b["generation"], b["steps_confirmed"], b["in_doubt"], b["llm_calls"]) == (
        "b-running",
        1,
        1,
        1,
        2,
    )
    assert b["owner"] == ELSEWHERE and b["lease_live"] is True and b["failure"] is None
    final = cli(database_url, "runs", "--status", "done,cancelled", "--json").json()
    assert sorted(r["id"] for r in final["runs"]) == ["c-done", "d-cancelled"]
    assert next(r for r in final["runs"] if r["id"] == "d-cancelled")["failure"] == (
        "cancelled by operator: not needed"
    )
    both = cli(database_url, "runs", "--status", "pending", "--status", "done", "--json").json()
    assert sorted(r["id"] for r in both["runs"]) == ["a-pending", "c-done"]
    limited = cli(database_url, "runs", "--limit", "2").stdout.splitlines()
    more = next(ln for ln in limited if ln.startswith("showing 2 runs, more follow"))
    after = more.split("--after ")[1].split()[0]
    rest = cli(database_url, "runs", "--limit", "2", "--after", after).stdout.splitlines()
    assert "2 runs" in rest and not any(ln.startswith("showing") for ln in rest)
    shown = [ln.split()[0] for ln in limited[1:3] + rest[1:3]]
    assert shown == [ln.split()[0] for ln in lines[1:5]]  # the same runs, in the same order

    clock.advance(conn, 13)
    row = next(ln for ln in cli(database_url, "runs").stdout.splitlines() if "b-run" in ln)
    assert "expired " in row and " ago)" in row

    bad = cli(database_url, "runs", "--status", "sleeping")
    assert bad.code == EXIT_USAGE and "unknown status sleeping" in bad.stderr


def test_runs_on_an_empty_journal_says_so(conn: Any, database_url: str) -> None:
    out = cli(database_url, "runs")
    assert (out.code, out.stdout.strip()) == (0, "no runs yet")
    assert cli(database_url, "runs", "--json").json() == {"now": None, "next": None, "runs": []}


# -- cancel ---------------------------------------------------------------------------------


@pytest.fixture
def in_process(tmp_path: Path) -> Iterator[tuple[Cloud, Model]]:
    with Cloud(tmp_path / "cloud.sqlite3") as cloud:
        yield cloud, Model()


def test_a_worker_cancelled_mid_run_stops_at_its_next_write_and_changes_nothing(
    conn: Any, database_url: str, in_process: tuple[Cloud, Model]
) -> None:
    cloud, model = in_process

    def cancel_now(point: str, seq: int) -> None:  # the operator acts while the worker waits
        with db.connection(database_url) as other:
            cancel_run(other, "c1", "changed my mind")

    worker = Worker.build(
        Journal(conn),
        Settings(cloud_url="http://cloud", model_url="http://model", tool_retries=0),
        model_transport=model_transport(model),
        cloud_transport=cloud_transport(cloud),
        crash=CrashPlan(point="after_decide", seq=1, action=cancel_now),
    )
    try:
        with pytest.raises(LeaseLost, match="intent seq=1 not written"):
            worker.run("c1")
    finally:
        worker.decider.close()

    history = Journal(conn).history("c1")
    assert sorted(history.decisions) == [0, 1]  # seq 1 was decided before the cancel
    assert [(c.seq, c.state) for c in history.calls.values()] == [(0, "confirmed")]
    assert cloud.counts("c1") == {"servers": 1, "databases": 0, "dns_records": 0}
    run = Journal(conn).require_run("c1")
    assert (run.status, run.owner, run.failure) == (
        "cancelled",
        None,
        "cancelled by operator: changed my mind",
    )
    shown = cli(database_url, "show", "c1").stdout
    assert "cancelled at " in shown and "so it will never be called" in shown


@pytest.mark.usefixtures("frozen_clock")
def test_cancel_from_the_command_line_is_final_and_idempotent(conn: Any, database_url: str) -> None:
    journal = Journal(conn)
    lease = _claimed(journal, "c2", ELSEWHERE)
    journal.record_decision(lease, 0, "create_server", dict(SERVER))
    journal.record_intent(lease, 0)

    first = cli(database_url, "cancel", "c2", "--reason", "demo over")

    assert first.code == 0, first.stderr
    assert "run c2 cancelled (was running, generation 1, held by another-host" in first.stdout
    assert "left in doubt, never to be re-sent: c2:0" in first.stdout
    with pytest.raises(LeaseLost):
        journal.renew(lease, 12.0)  # the heartbeat notices too
    again = cli(database_url, "cancel", "c2", "--json")
    assert again.code == 0 and again.json()["already_cancelled"] is True
    shown = cli(database_url, "show", "c2", "--json").json()
    assert "the run is cancelled, so nothing will re-send under c2:0" in shown["in_doubt"][0]
    refused = cli(database_url, "resolve", "c2")
    assert refused.code == EXIT_NOT_OWNER and "stay in doubt" in refused.stderr

    done = _claimed(journal, "c3", ELSEWHERE)
    journal.record_decision(done, 0, "done", {})
    journal.finish(done)
    late = cli(database_url, "cancel", "c3")
    assert late.code == EXIT_NOT_OWNER and "run c3 is done" in late.stderr


# -- errors: one line each, non-zero ---------------------------------------------------------


def _one_error_line(out: Out, kind: str) -> str:
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr
    assert lines[0].startswith(f"ERROR {kind} error="), lines[0]
    assert out.stdout == ""
    return lines[0]


COMMANDS = [("runs",), ("show", "nope"), ("resolve", "nope"), ("cancel", "nope")]


@pytest.mark.parametrize("command", COMMANDS[1:], ids=lambda c: c[0])
def test_an_unknown_run_is_one_line_and_exit_2(
    command: tuple[str, ...], conn: Any, database_url: str
) -> None:
    out = cli(database_url, *command)
    assert out.code == EXIT_USAGE
    assert "no run with id 'nope'" in _one_error_line(out, "RunNotFound")


@pytest.fixture
def empty_database(conn: Any, database_url: str) -> Iterator[str]:
    name = f"cr_op_empty_{uuid.uuid4().hex[:8]}"
    conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        yield make_conninfo(database_url, dbname=name)
    finally:
        conn.execute(sql.SQL("DROP DATABASE {}").format(sql.Identifier(name)))


@pytest.mark.parametrize("command", COMMANDS[1:], ids=lambda c: c[0])
def test_a_database_without_the_schema_is_one_line_and_left_untouched(
    command: tuple[str, ...], empty_database: str
) -> None:
    out = cli(empty_database, *command)
    assert out.code == EXIT_RETRY_LATER
    assert "no crashresume schema" in _one_error_line(out, "DatabaseError")
    with db.connection(empty_database) as c:
        assert not db.has_schema(c)  # an operator view never creates it behind your back


def test_runs_on_a_database_without_the_schema_says_there_are_no_runs_yet(
    empty_database: str,
) -> None:
    out = cli(empty_database, "runs")
    assert (out.code, out.stderr) == (0, ""), out.stderr
    assert out.stdout.startswith("no runs yet: the database ")
    assert "has no crashresume schema (nothing has run against it;" in out.stdout
    as_json = cli(empty_database, "runs", "--json")
    assert as_json.code == 0, as_json.stderr
    assert as_json.json() == {"now": None, "next": None, "runs": []}
    with db.connection(empty_database) as c:
        assert not db.has_schema(c)  # still not created behind the operator's back


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c[0])
def test_an_unreachable_database_is_one_line(command: tuple[str, ...]) -> None:
    # nothing listens on port 1
    out = cli("postgresql://postgres@127.0.0.1:1/none", *command)
    assert out.code == EXIT_RETRY_LATER
    assert "cannot reach the database at 127.0.0.1:1/none" in _one_error_line(out, "DatabaseError")
