"""An outage never fails a run for good: real supervisors, real sockets switched off.

The model is reached through a forwarder the test switches off (``fix_proxy``): while
it is down nothing listens on its port and every connection in flight is cut. The
outage itself lasts real seconds; every backoff after it is skipped by moving the
database clock (``clock.advance``), never by sleeping.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from agent_runtime.store import clock
from agent_runtime.store.journal import Journal

from .fix_runtime import Agent, journal_rows
from .fix_supervisor import WAIT, SupervisorProcess, wait_for

FAST = ("--poll", "0.1", "--lease", "12", "--heartbeat", "3")
OUTAGE = 3.0  # seconds the model is unreachable (the issue measured 1-2 s; 3 s is sure to fail
# a run today on a slow machine, where forking 20 workers slows the retry loop down)
STEP = 5.0  # seconds the clock moves at a time: well inside a lease, so no live one expires


def _statuses(conn: Any, run_ids: list[str]) -> dict[str, str]:
    rows = conn.execute("SELECT id, status FROM runs WHERE id = ANY(%s)", (run_ids,)).fetchall()
    return {r["id"]: r["status"] for r in rows}


def _confirms(conn: Any, run_ids: list[str]) -> int:
    row = conn.execute(
        "SELECT count(*) AS n FROM tool_calls WHERE run_id = ANY(%s) AND state = 'confirmed'",
        (run_ids,),
    ).fetchone()
    return int(row["n"])


def _held(conn: Any, run_ids: list[str]) -> int:
    """Unfinished runs a worker holds right now (a lease live by cr_now())."""
    row = conn.execute(
        "SELECT count(*) AS n FROM runs WHERE id = ANY(%s) AND status IN ('pending', 'running')"
        " AND owner IS NOT NULL AND lease_expires_at > cr_now()",
        (run_ids,),
    ).fetchone()
    return int(row["n"])


def _settle(conn: Any, run_ids: list[str], sup: SupervisorProcess) -> None:
    """Wait for every run to end; move the clock on only while no worker holds one, so
    backoffs pass without sleeping and no live lease is ever expired."""
    deadline = time.monotonic() + 2 * WAIT
    while True:
        statuses = _statuses(conn, run_ids)
        if all(s in ("done", "failed", "cancelled") for s in statuses.values()):
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"runs still unfinished: {statuses}\n{sup.text[-3000:]}")
        if _held(conn, run_ids) == 0:
            clock.advance(conn, STEP)
        time.sleep(0.05)


def _each_step_once(conn: Any, mock_servers: Any, run_id: str) -> None:
    resources = mock_servers.resources(run_id)
    assert resources["counts"] == {"servers": 1, "databases": 1, "dns_records": 1}, run_id
    rows = journal_rows(conn, run_id)
    sent = {r["key"]: r["args"] for r in resources["resources"]}
    assert sent == {f"{run_id}:{d['seq']}": d["args"] for d in rows["decisions"][:3]}
    assert [c["state"] for c in rows["calls"]] == ["confirmed"] * 3


@pytest.mark.usefixtures("frozen_clock")
def test_a_model_outage_of_three_seconds_fails_none_of_twenty_runs_in_flight(
    agent: Agent, conn: Any, mock_servers: Any, supervisors: Any, outage_proxy: Any
) -> None:
    model = outage_proxy(mock_servers.model_url)
    runs = [f"outage-{i:02d}" for i in range(20)]
    journal = Journal(conn)
    for run_id in runs:
        journal.create_run(run_id)
    mock_servers.set_model_faults(latency=0.3)  # every run spends a while asking
    # The supervisor's give-up rules are its defaults: that is what must not fail a run.
    sup = supervisors(*FAST, "--max-workers", "20", MODEL_URL=model.url)
    wait_for("runs in flight", lambda: _confirms(conn, runs) >= 10)

    model.down()
    time.sleep(OUTAGE)  # real time: the outage itself, seconds in which nothing answers
    model.up()
    mock_servers.set_model_faults(latency=0)
    _settle(conn, runs, sup)

    statuses = _statuses(conn, runs)
    assert sorted(r for r, s in statuses.items() if s != "done") == [], sup.text[-3000:]
    for run_id in runs:
        _each_step_once(conn, mock_servers, run_id)
    assert "gave-up" not in sup.text
    assert "backoff run=" in sup.text  # the outage was felt, and waited out


def _run(conn: Any, run_id: str) -> dict[str, Any]:
    row = conn.execute(
        "SELECT status, owner, attempts, failure, lease_expires_at > cr_now() AS waiting,"
        " extract(epoch FROM cr_now() - (SELECT min(claimed_at) FROM run_claims c"
        "   WHERE c.run_id = runs.id))::float AS trying_for"
        " FROM runs WHERE id = %s",
        (run_id,),
    ).fetchone()
    assert row is not None
    return dict(row)


@pytest.mark.usefixtures("frozen_clock")
def test_a_model_that_stays_down_fails_a_run_only_after_its_attempts_and_ten_minutes(
    agent: Agent, conn: Any, mock_servers: Any, supervisors: Any, outage_proxy: Any
) -> None:
    model = outage_proxy(mock_servers.model_url)
    model.down()  # and it stays down
    Journal(conn).create_run("down")
    sup = supervisors(*FAST, "--max-attempts", "3", MODEL_URL=model.url)  # default time limit

    def waiting_with(attempts: int) -> dict[str, Any] | None:
        run = _run(conn, "down")
        return (
            run if run["owner"] is None and run["waiting"] and run["attempts"] >= attempts else None
        )

    for attempts in (1, 2, 3):  # each wait passes by moving the clock just past it
        run = wait_for(f"attempt {attempts} to back off", lambda a=attempts: waiting_with(a))
        if attempts < 3:
            clock.advance(conn, STEP)
    assert run["status"] == "running" and run["trying_for"] < 60, run
    assert "gave-up" not in sup.text  # three attempts, but well under a minute of trying

    while (run := _run(conn, "down"))["status"] != "failed":
        if run["owner"] is None and run["waiting"]:  # nobody can claim it: safe to jump
            clock.advance(conn, 100)
        assert run["trying_for"] < 1000, sup.text[-2000:]
        time.sleep(0.05)

    assert run["trying_for"] >= 600
    assert run["failure"].startswith(f"gave up after {run['attempts']} attempts in ")
    assert "s without progress: ModelUnavailable: cannot reach the model" in run["failure"]
    # The supervisor commits the failure, then logs it: the line may still be on its way.
    wait_for("the gave-up line", lambda: "gave-up run=down" in sup.text)


@pytest.mark.usefixtures("frozen_clock")
def test_a_run_that_kills_its_worker_every_time_is_resumed_once_at_once_then_waits(
    agent: Agent, conn: Any, mock_servers: Any, supervisors: Any
) -> None:
    Journal(conn).create_run("poison")
    every_worker_dies = {"CRASH_AT": "before_decide", "RUN_BACKOFF": "30"}
    first = supervisors(*FAST, "--once", **every_worker_dies)
    assert first.wait() == 0, first.text
    assert [code for _, code in first.exits("poison")] == [1, 1]  # the second came at once
    assert "backoff run=poison attempt=2 until=" in first.text
    run = _run(conn, "poison")
    assert run["owner"] is None and run["waiting"] and run["status"] == "running"

    clock.advance(conn, 30)  # the longest first wait
    second = supervisors(*FAST, "--once", **every_worker_dies)
    assert second.wait() == 0, second.text
    assert [code for _, code in second.exits("poison")] == [1]
    assert "backoff run=poison attempt=3 until=" in second.text
    clock.advance(conn, 30)
    assert _run(conn, "poison")["waiting"]  # the third wait is longer than the second


def test_a_stopping_supervisor_hands_back_at_once_even_a_run_that_failed_before(
    agent: Agent, conn: Any, mock_servers: Any, supervisors: Any
) -> None:
    journal = Journal(conn)
    journal.create_run("tried")
    for _ in range(2):  # two attempts without progress already: a death would back off
        lease = journal.claim("tried", "w:1:x", 12.0)
        assert lease is not None and journal.release(lease, "ModelUnavailable: down", 0.0)
    mock_servers.set_model_faults(latency=0.5)
    sup = supervisors(*FAST)
    wait_for("the worker", lambda: sup.resumed("tried"))
    assert sup.stop() == 0
    run = _run(conn, "tried")
    assert run["owner"] is None and not run["waiting"], sup.text  # the SIGTERM was ours
    assert "backoff run=tried" not in sup.text
