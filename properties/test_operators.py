"""Operators mid-step: cancel, retry and resolve --confirm/--redo/--fail land while a
worker stands at a gate, crashes follow, and the journal and the remotes stay true."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import psycopg
import pytest

from . import sqlfile
from .events import Event, Schedule, ScheduleError
from .minimise import first_failure
from .planting import failure, plant_sql
from .runners import InProcessRunner, ProcessRunner
from .scope import story
from .server import SuiteDatabase

START_ONCE = Event(op="start", run=0, agent="once")
# The operator cancels while the worker has written the intent of its keyed create_server
# and not yet sent it; the worker then goes on.
CANCEL_BEFORE_A_KEYED_SEND = [
    Event(op="start", run=0),
    Event(op="pause", run=0, point="after_intent", seq=0),
    Event(op="cancel", run=0),
    Event(op="step", run=0),
]
# Every operator event, mid-step and followed by crashes, on three runs of three kinds.
OPERATORS = [
    Event(op="start", run=0),
    Event(op="pause", run=0, point="after_decide_before_journal", seq=1),
    Event(op="cancel", run=0),
    Event(op="crash", run=0, point="after_decide_before_journal", seq=1),
    Event(op="restart", run=0),
    Event(op="retry", run=0),
    Event(op="start", run=1, agent="once"),
    Event(op="stall", run=1, point="after_intent", seq=2),
    Event(op="sweep"),
    Event(op="resolve", run=1, choice="redo"),
    Event(op="resume", run=1),
    Event(op="sweep", seconds=0.0),
    Event(op="crash", run=1, point="after_call", seq=2, kill=True),
    Event(op="restart", run=1),
    Event(op="start", run=2, agent="support"),
    Event(op="crash", run=2, point="after_call", seq=1),
    Event(op="tick", seconds=13.0),
    Event(op="retry", run=2),
    Event(op="sweep", seconds=0.0),
    Event(op="cancel", run=2),
    Event(op="step", run=2),
]


def _replayed(runner: InProcessRunner | ProcessRunner, events: list[Event]) -> dict[str, Any]:
    outcome = runner.replay(events)
    return {"outcome": outcome, "trace": list(runner.trace)}


def test_a_resolve_choice_round_trips_and_a_format_3_file_still_loads(tmp_path: Path) -> None:
    events = (Event(op="resolve", run=1, choice="fail"), Event(op="cancel", run=0))
    path = Schedule(events=events).save(tmp_path / "ops.json")
    assert Schedule.load(path).events == events
    assert json.loads(path.read_text())["format"] == "crashresume.schedule/6"
    old = {"format": "crashresume.schedule/3", "events": [{"op": "resolve", "run": 0}]}
    (tmp_path / "old.json").write_text(json.dumps(old))
    assert Schedule.load(tmp_path / "old.json").events == (Event(op="resolve", run=0),)
    assert str(events[0]) == "resolve r1 --fail"
    with pytest.raises(ScheduleError, match="choice belongs to a resolve"):
        Event(op="cancel", run=0, choice="redo")
    with pytest.raises(ScheduleError, match="choice belongs to a resolve"):
        Event(op="resolve", run=0, choice="guess")


def test_a_worker_cancelled_at_its_once_send_sends_nothing_and_nobody_claims_the_run(
    inprocess_runner: InProcessRunner,
) -> None:
    events = [
        START_ONCE,
        Event(op="pause", run=0, point="after_intent", seq=2),
        Event(op="cancel", run=0),
        Event(op="step", run=0),
        Event(op="restart", run=0),
        Event(op="sweep"),
        Event(op="cancel", run=0),
        Event(op="retry", run=0),
    ]
    outcome = inprocess_runner.replay(events)
    assert inprocess_runner.trace[2:] == [
        "cancel r0: cancelled (was running; w1 at after_intent seq=2)",
        "step r0: w1 ended: LeaseLost",
        "restart r0: w2 ended: RunUnavailable",
        "sweep: nobody beats; claimed nothing",
        "cancel r0: refused: already cancelled",
        "retry r0: refused: the run is cancelled",
    ]
    run = outcome["r0"]
    assert run["status"] == "cancelled"  # the teardown leaves a cancelled run cancelled
    assert [c[2] for c in run["calls"]] == ["confirmed", "confirmed", "intent"]
    assert [e[1] for e in run["effects"]] == ["ticket"]  # the email never went out


def test_nothing_a_cancelled_worker_sends_is_accepted_by_a_keyed_remote(
    inprocess_runner: InProcessRunner,
) -> None:
    # start r0; pause r0 at after_intent seq=0; cancel r0; step r0: the cloud accepted
    # r0:0 from the cancelled generation before issue 21's point 3 ([cancel_fence])
    outcome = inprocess_runner.replay(CANCEL_BEFORE_A_KEYED_SEND)
    assert outcome["r0"]["effects"] == []
    assert any("ended: LeaseLost" in line for line in inprocess_runner.trace)


class RevivingRunner(InProcessRunner):
    """A broken operator path: retry puts a cancelled run back to pending."""

    def _on_retry(self, e: Event) -> str:
        sqlfile.rows(self.conn, "revive_cancelled", {"run": e.run_name})
        self.operated.add(e.run_name)
        return "revived"


def test_the_cancel_fence_catches_a_cancelled_run_that_is_claimed_again(
    suite_database: SuiteDatabase, inprocess_runner: InProcessRunner
) -> None:
    events = [
        Event(op="start", run=0),
        Event(op="pause", run=0, point="before_intent", seq=1),
        Event(op="cancel", run=0),
        Event(op="crash", run=0, point="before_intent", seq=1),
        Event(op="retry", run=0),
        Event(op="sweep", seconds=0.0),
    ]
    broken = RevivingRunner(suite_database.url, server=suite_database)
    try:
        failure = first_failure(broken, events)
    finally:
        broken.close()
    assert failure is not None and "[cancel_fence] run r0" in str(failure)
    assert "it is pending again" in str(failure)
    assert first_failure(inprocess_runner, events) is None


def test_a_retried_run_goes_on_from_its_journal_and_a_redo_sends_once_more_once(
    inprocess_runner: InProcessRunner,
) -> None:
    outcome = inprocess_runner.replay(OPERATORS)
    trace = inprocess_runner.trace
    assert "retry r0: refused: the run is cancelled" in trace
    assert "resolve r1 --redo: an operator resolved r1:2: redo; w3 waits" in trace
    assert "resume r1: w3 ended: LeaseLost" in trace  # the zombie checks and sends nothing
    assert "restart r1: w6 ended: NeedsAttention" in trace  # the redo crashed after its send
    assert "retry r2: retried (was running, now running)" in trace
    assert [o["status"] for o in (outcome["r0"], outcome["r1"], outcome["r2"])] == [
        "cancelled",
        "done",
        "cancelled",
    ]
    emails = [e for e in outcome["r1"]["effects"] if e[1] == "email"]
    assert len(emails) == 1  # redone once, crashed after the send, never sent again
    assert outcome["r1"]["calls"][2][2:4] == ["confirmed", "operator"]  # the teardown's


def test_an_operators_confirm_is_recorded_as_said_and_never_sent_again(
    inprocess_runner: InProcessRunner,
) -> None:
    events = [
        START_ONCE,
        Event(op="crash", run=0, point="after_call", seq=2),
        Event(op="restart", run=0),
        Event(op="resolve", run=0, choice="redo"),  # the desk delivered: no redo
        Event(op="resolve", run=0, choice="confirm"),
        Event(op="sweep", seconds=0.0),
        Event(op="crash", run=0, point="after_confirm", seq=3),
        Event(op="restart", run=0),
    ]
    outcome = inprocess_runner.replay(events)
    assert inprocess_runner.trace[3].startswith("resolve r0 --redo: skipped (the desk delivered")
    assert inprocess_runner.trace[4] == "resolve r0 --confirm: an operator resolved r0:2: confirm"
    call = outcome["r0"]["calls"][2]
    assert call[2:4] == ["confirmed", "operator"]
    assert [e[1] for e in outcome["r0"]["effects"]].count("email") == 1


def test_operator_events_replay_the_same_in_both_runners(
    inprocess_runner: InProcessRunner, process_runner: ProcessRunner
) -> None:
    assert _replayed(process_runner, OPERATORS) == _replayed(inprocess_runner, OPERATORS)


@pytest.mark.parametrize(
    ("mutant", "said"),
    [
        ("sql/operator.sql:operator_resolve_call:flip_comparison:5f3d5e29", "its audit says"),
        ("sql/operator.sql:operator_resolve_call:flip_comparison:dbf26d5a", "confirmed time"),
        ("sql/operator.sql:operator_resolve_call:flip_comparison:501d2dc8", "it said confirmed"),
        ("sql/operator.sql:operator_load_resolutions:flip_comparison:c1f12579", "show lists"),
    ],
)
def test_what_resolve_reports_is_what_it_did(
    runner: InProcessRunner, monkeypatch: pytest.MonkeyPatch, mutant: str, said: str
) -> None:
    """An operator acts on resolve's report and audits by its row: the audit's result, the
    status the CLI prints, the confirmed time and show's list each passed the whole suite
    wrong (the four SQL mutants)."""
    events = story("once", "resolve_confirm", "after_call", 2)  # the grid's: it passes
    plant_sql(monkeypatch, mutant)

    found = failure(runner, events)

    assert "[resolution] run r0 step 2: an operator's --confirm of r0:2" in found
    assert said in found


def test_a_resolution_survives_a_database_crash(
    runner: InProcessRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An operator's resolution is a durable write: relaxed (1e52f83f), the crash right
    after it took it back and the run was parked again."""
    parked = story("once", "resolved_db_crash", "", 2)
    assert failure(runner, parked) == ""
    plant_sql(monkeypatch, "sql/operator.sql:operator_resolve_call:relax_commit:1e52f83f")
    assert "an operator's resolution (confirm, fail, redo)" in failure(runner, parked)


def test_a_resolve_that_reaches_past_its_run_is_caught(
    runner: InProcessRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two once runs parked at the same step, and an operator resolves r0's call: a
    resolve without its run's id (88931b9c) takes r1's call too, and its statement fails
    (the suite had never parked two runs at once)."""
    events = story("once", "two_parked", "", 2, "send_email")
    assert failure(runner, events) == ""
    plant_sql(monkeypatch, "sql/operator.sql:operator_resolve_call:drop_conjunct:88931b9c")

    with pytest.raises(psycopg.errors.CardinalityViolation):
        failure(runner, events)
