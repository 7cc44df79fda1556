"""Requests held in flight at a remote, in both runners.

A held request is received and answered ``504 held``; it acts at a ``land`` event, or
never once the clock has passed its in-flight bound (the remote's promise). The runtime
must neither check a ``checked`` call while it may still land nor lose its effect.
"""

from __future__ import annotations

from .events import Event
from .runners import InProcessRunner, ProcessRunner

# The kill-while-in-flight story: every attempt at the email is held, its worker gives up,
# a restart comes at once (its check must wait), the held request lands, a sweep settles.
GIVEN_UP = [
    Event(op="start", run=0, agent="support"),
    Event(op="pause", run=0, point="after_intent", seq=2),
    Event(op="cloud_fault", fault="hold_next", n=3),
    Event(op="step", run=0),
    Event(op="restart", run=0),
    Event(op="land"),
    Event(op="sweep"),
]


def test_a_held_email_lands_once_and_the_restart_finds_it_in_both_runners(
    inprocess_runner: InProcessRunner, process_runner: ProcessRunner
) -> None:
    first = inprocess_runner.replay(GIVEN_UP)
    trace = list(inprocess_runner.trace)

    assert process_runner.replay(GIVEN_UP) == first
    assert process_runner.trace == trace
    assert any("ended: CallInFlight" in line for line in trace), trace
    assert any("landed: delivered" in line for line in trace), trace
    calls = first["r0"]["calls"]
    assert [c[1] for c in calls] == ["r0:0", "r0:1", "r0:2"]
    assert calls[2][3] == "found"  # the check after the bound found the landed email
    assert [e[0] for e in first["r0"]["effects"] if e[1] == "email"] == ["r0:2"]  # one email


def test_a_held_request_past_its_bound_never_acts(inprocess_runner: InProcessRunner) -> None:
    late = [*GIVEN_UP[:4], Event(op="tick", seconds=13.0), Event(op="land"), Event(op="sweep")]

    outcome = inprocess_runner.replay(late)

    assert any(line.startswith("land: skipped (nothing held)") for line in inprocess_runner.trace)
    calls = outcome["r0"]["calls"]
    assert calls[2][3] == "created"  # checked after the bound: absent, so sent once
    assert [e[0] for e in outcome["r0"]["effects"] if e[1] == "email"] == ["r0:2"]
