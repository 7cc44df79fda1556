"""What ``run``, ``show`` and ``runs`` say about a run a newcomer just made: its input and
final answer, a result without an ``id``, a run backing off (issue 23's newcomer frictions)."""

from __future__ import annotations

from typing import Any

from agent_runtime.store import clock
from agent_runtime.store.journal import Journal
from agent_runtime.store.records import Lease

from .fix_runtime import Agent
from .operator_cli import cli

TASK = "Provision a server for the demo"


def _claimed(journal: Journal, run_id: str, task: str | None = None) -> Lease:
    journal.create_run(run_id, input=task)
    lease = journal.claim(run_id, "w:1:test", 12.0)
    assert lease is not None
    return lease


def test_run_prints_the_runs_input_and_final_answer(agent: Agent) -> None:
    done = agent.run("newcomer-run", "run", "--input", TASK)
    assert done.code == 0, done.out
    assert "run newcomer-run: done, 3 steps" in done.out
    assert f"input   {TASK}" in done.out
    assert "answer  - (the model gave none)" in done.out  # the mock model's done has no text


def test_show_prints_the_runs_input_and_final_answer(conn: Any, database_url: str) -> None:
    journal = Journal(conn)
    lease = _claimed(journal, "shown", TASK)
    journal.record_decision(lease, 0, "done", {})
    journal.finish(lease, "Your server is srv-1.")
    own = _claimed(journal, "own-task")

    shown = cli(database_url, "show", "shown")
    assert shown.code == 0, shown.stderr
    assert f"input    {TASK}" in shown.stdout.splitlines()
    assert "answer   Your server is srv-1." in shown.stdout.splitlines()
    other = cli(database_url, "show", own.run_id).stdout.splitlines()
    assert "input    - (started without one: the agent's own task)" in other
    assert "answer   - (none yet)" in other


def test_show_prints_a_result_without_an_id_as_its_json(conn: Any, database_url: str) -> None:
    journal = Journal(conn)
    lease = _claimed(journal, "no-id")
    journal.record_decision(lease, 0, "create_server", {"name": "srv-1"})
    call = journal.record_intent(lease, 0)
    journal.record_confirm(lease, call, {"ok": True, "size": "small"}, "created")

    shown = cli(database_url, "show", "no-id")
    assert shown.code == 0, shown.stderr
    assert 'result {"ok":true,"size":"small"}  remote created' in shown.stdout
    assert "result None" not in shown.stdout


def test_runs_says_backing_off_for_a_run_that_stopped_and_waits(
    conn: Any, database_url: str, frozen_clock: Any
) -> None:
    journal = Journal(conn)
    lease = _claimed(journal, "waits")
    assert journal.release(lease, "model unavailable", delay=30.0)
    assert journal.require_run("waits").status in ("pending", "running")

    table = cli(database_url, "runs")
    row = next(ln for ln in table.stdout.splitlines() if ln.startswith("waits "))
    assert row.split()[1] == "backing-off", row
    assert "backoff until" in row

    clock.advance(conn, 31.0)
    table = cli(database_url, "runs")
    row = next(ln for ln in table.stdout.splitlines() if ln.startswith("waits "))
    assert row.split()[1] != "backing-off", row
