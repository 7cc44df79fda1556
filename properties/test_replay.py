"""Schedules are data: saved as JSON, replayed by one command, the same way every time."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given

from .events import Event, Schedule, ScheduleError
from .profiles import active_profile, profile_settings
from .runners import InProcessRunner, ProcessRunner
from .scope import story
from .server import DATADIR_ENV, SuiteDatabase
from .strategies import schedules

ROOT = Path(__file__).resolve().parent.parent
REPLAY_TIMEOUT = 120  # seconds for one replay command

# Every kind of event, two runs, a zombie that comes back after its run was stolen.
BUSY = [
    Event(op="start", run=0),
    Event(op="step", run=0),
    Event(op="crash", run=0, point="after_call"),
    Event(op="start", run=1),
    Event(op="stall", run=1, point="after_decide_before_journal"),
    Event(op="sweep"),
    Event(op="resume", run=1),
    Event(op="restart", run=0),
    Event(op="model_fault", fault="malformed", n=1),
    Event(op="step", run=0),
    Event(op="drop_connection", run=1),
    Event(op="step", run=1),
    Event(op="cloud_fault", fault="fail_before", n=2),
    Event(op="cloud_fault", fault="latency", seconds=0.002),
    Event(op="crash", run=0, point="after_confirm", kill=True),
    Event(op="start", run=2),
    Event(op="restart", run=2),
    Event(op="heartbeat", run=2),
    Event(op="db_crash", run=2, point="after_call"),
    Event(op="tick", seconds=13.0),
    Event(op="sweep", seconds=0.0),
]
# Caught with the confirm_before_call variant, harmless with the real runtime.
CONFIRM_FIRST = Schedule(
    events=(Event(op="start", run=0), Event(op="crash", run=0, point="after_intent")),
    name="confirm-first",
    variant="confirm_before_call",
)


def test_the_same_schedule_replays_to_the_same_outcome_in_both_runners(
    inprocess_runner: InProcessRunner, process_runner: ProcessRunner
) -> None:
    first = inprocess_runner.replay(BUSY)
    first_trace = list(inprocess_runner.trace)
    assert inprocess_runner.replay(BUSY) == first
    assert inprocess_runner.trace == first_trace
    assert process_runner.replay(BUSY) == first
    assert process_runner.trace == first_trace
    assert process_runner.replay(BUSY) == first
    # The schedule did what it says: a zombie fenced, a crash after the remote acted
    # answered already_done on restart, a re-ask after the malformed answer.
    assert any("ended: LeaseLost" in line for line in first_trace)
    assert [c[1] for c in first["r0"]["calls"]] == ["r0:0", "r0:1", "r0:2"]
    assert first["r0"]["calls"][1][3] == "already_done"
    assert first["r1"]["model_calls"] == 5  # 4 answers journaled + 1 held by the fenced zombie


@pytest.mark.parametrize(
    ("kind", "how"), [("provisioning", "wait_outpaced"), ("support", "wait_cancelled")]
)
def test_a_retry_wait_is_the_same_gate_in_both_runners(
    inprocess_runner: InProcessRunner, process_runner: ProcessRunner, kind: str, how: str
) -> None:
    """A worker's wait before a re-send (its client's, or its tool's backoff) is a gate in a
    thread and in a process alike; neither really sleeps."""
    events = story(kind, how, "", 1)
    first = inprocess_runner.replay(events)
    trace = list(inprocess_runner.trace)
    assert any("waits at retry_wait seq=1" in line for line in trace)
    assert any("ended: LeaseLost" in line for line in trace)  # no re-send after the wait
    assert process_runner.replay(events) == first
    assert process_runner.trace == trace


def test_random_schedules_replay_deterministically(inprocess_runner: InProcessRunner) -> None:
    examples = {"dev": 10, "ci": 25, "nightly": 300}[active_profile()]

    @profile_settings(active_profile(), max_examples=examples)
    @given(schedules())
    def twice(events: list[Event]) -> None:
        first = inprocess_runner.replay(events)
        trace = list(inprocess_runner.trace)
        assert inprocess_runner.replay(events) == first
        assert inprocess_runner.trace == trace

    twice()


def test_a_schedule_round_trips_through_json(tmp_path: Path) -> None:
    schedule = Schedule(
        events=tuple(BUSY), name="busy", variant="no_fencing", seed=7, profile="nightly"
    )
    path = schedule.save(tmp_path / "busy.json")
    loaded = Schedule.load(path)
    assert loaded.events == schedule.events
    assert (loaded.name, loaded.variant, loaded.seed, loaded.profile) == (
        "busy",
        "no_fencing",
        7,
        "nightly",
    )
    assert json.loads(path.read_text())["length"] == len(BUSY)
    assert Schedule.from_json([e.to_json() for e in BUSY]).events == tuple(BUSY)


@pytest.mark.parametrize(
    ("event", "complaint"),
    [
        ({"op": "explode"}, "unknown op 'explode'"),
        ({"op": "crash", "run": 0, "point": "after_lunch"}, "needs point in before_decide"),
        ({"op": "step"}, "step needs run in 0..2"),
        ({"op": "step", "run": 0, "colour": "red"}, "unknown event field(s) colour"),
        ({"op": "cloud_fault", "fault": "fail_before"}, "needs n >= 1"),
        ({"op": "configure", "setting": "lease", "n": 1}, "configure needs setting in"),
        ({"op": "configure", "setting": "tool_retries", "n": 9}, "got 'tool_retries' n=9"),
        ({"op": "step", "run": 0, "setting": "tool_retries"}, "configure needs setting in"),
    ],
)
def test_a_malformed_event_is_refused_with_what_is_wrong(
    event: dict[str, object], complaint: str
) -> None:
    with pytest.raises(ScheduleError, match=complaint.replace("(", r"\(").replace(")", r"\)")):
        Event.from_json(event)


def _replay(path: Path, database: SuiteDatabase, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, DATADIR_ENV: str(database.cluster.datadir)}
    return subprocess.run(
        [sys.executable, "-m", "properties.replay", str(path), *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=REPLAY_TIMEOUT,
    )


@pytest.mark.parametrize("mode", ["inprocess", "process"])
def test_the_replay_command_reproduces_a_saved_failure(
    mode: str, tmp_path: Path, suite_database: SuiteDatabase
) -> None:
    path = CONFIRM_FIRST.save(tmp_path / "confirm-first.json")

    broken = _replay(path, suite_database, "--mode", mode)
    assert broken.returncode == 1, broken.stdout + broken.stderr
    assert "VIOLATION after event 2 (crash r0 at after_intent)" in broken.stdout
    assert (
        "confirmed r0:0 as created by generation 1, but the remote answered no request of that "
        "generation under that key" in broken.stdout
    )

    fixed = _replay(path, suite_database, "--mode", mode, "--variant", "correct")
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    assert "no violation" in fixed.stdout
    assert "r0: done tools=['create_server', 'create_database', 'create_dns_record', 'done']" in (
        fixed.stdout
    )


def test_the_replay_command_refuses_a_file_that_is_not_a_schedule(
    tmp_path: Path, suite_database: SuiteDatabase
) -> None:
    path = tmp_path / "nope.json"
    path.write_text('{"format": "something else"}')
    result = _replay(path, suite_database)
    assert result.returncode == 2
    assert "not a crashresume.schedule/6 file" in result.stderr


def test_a_fresh_interpreter_per_worker_gives_the_same_outcome(
    suite_database: SuiteDatabase, inprocess_runner: InProcessRunner
) -> None:
    events = BUSY[:8]
    expected = inprocess_runner.replay(events)
    trace = list(inprocess_runner.trace)
    execs = ProcessRunner(suite_database.url, spawn="exec", server=suite_database)
    try:
        assert execs.replay(events) == expected
        assert execs.trace == trace
    finally:
        execs.close()


def test_a_zombies_keyed_request_after_its_run_parked_is_not_the_run_acting(
    inprocess_runner: InProcessRunner,
) -> None:
    """Found by the nightly hunt: w1, frozen before its ticket, wakes after its run parked
    (at generation 3) and re-sends under its key; the desk answers ``already_done``. That
    is a zombie's request, judged by the other invariants, not the parked run acting."""
    events = [
        Event(op="start", run=0, agent="once"),
        Event(op="stall", run=0, point="after_intent", seq=1),
        Event(op="sweep"),
        Event(op="crash", run=0, point="before_intent"),
        Event(op="restart", run=0),
        Event(op="cloud_fault", fault="fail_before", n=1),
        Event(op="stall", run=0, point="before_decide"),
    ]
    outcome = inprocess_runner.replay(events)
    assert any("ended: NeedsAttention" in line for line in inprocess_runner.trace)
    assert any("waiting w1 ended: LeaseLost" in line for line in inprocess_runner.trace)
    assert outcome["r0"]["status"] == "done"


@pytest.mark.parametrize(
    ("how", "raced"),
    [
        ("race_send", "w1 held in a write, w2 claims (claim waited)"),  # FOR SHARE: it waits
        ("race_claim", "the runner's takeover waited, then claimed nothing"),  # FOR UPDATE
        ("race_sweep", "the sweep did not wait, claimed nothing"),  # SKIP LOCKED
    ],
)
def test_a_race_inside_a_statement_replays_the_same_way_every_time(
    inprocess_runner: InProcessRunner, how: str, raced: str
) -> None:
    """A race interleaves two connections inside a statement, yet which way it goes is the
    locks' to say, not the machine's speed: the same trace every time."""
    events = story("support", how, "", 1)
    first = inprocess_runner.replay(events)
    trace = list(inprocess_runner.trace)
    assert inprocess_runner.replay(events) == first
    assert inprocess_runner.trace == trace
    (line,) = [line for line in trace if line.startswith("race")]
    assert raced in line
    assert any("w1 ended: LeaseLost" in line for line in trace)  # the outpaced one is fenced
    assert first["r0"]["status"] == "done"
