"""A tool that says nothing back: the `once` kind's email returns ``None``.

Its call is confirmed with a null result, and a Chat Completions conversation must still
answer the tool call (``null``), both as the run goes and when a resumed run rebuilds the
conversation from the journal: the mock model, like a real server, refuses a question that
leaves a tool call unanswered. Before the suite had such a tool, a runtime that dropped a
null result's tool message passed every schedule (tests/ alone guarded it).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from agent_runtime.llm import conversation

from .events import Event
from .invariants import _confirms_true
from .runners import InProcessRunner
from .violations import Violation, Violations

CALM = [Event(op="start", run=0, agent="once")]
# The email is the once run's third call (the lookup and the ticket come together first);
# the crash after its confirm makes the restart rebuild the conversation from the journal.
RESUMED = [
    Event(op="start", run=0, agent="once"),
    Event(op="crash", run=0, point="after_confirm", seq=2),
    Event(op="restart", run=0),
]
ANSWER_MESSAGES = conversation._answer_messages


def _unanswered(history: Any, decisions: list[Any]) -> list[dict[str, Any]]:
    """The slip the runtime once had, as a patch: a confirmed call whose result is null
    gets no tool message."""
    messages = ANSWER_MESSAGES(history, decisions)
    return [m for m in messages if not (m.get("role") == "tool" and m.get("content") == "null")]


@pytest.mark.parametrize("events", [CALM, RESUMED], ids=["calm", "resumed"])
def test_the_once_email_is_confirmed_with_a_null_result_and_the_run_finishes(
    inprocess_runner: InProcessRunner, events: list[Event]
) -> None:
    inprocess_runner.replay(events)
    now = inprocess_runner.observe()
    assert now.runs["r0"].status == "done"
    email = now.calls["r0"][2]
    assert (email.effect, email.state, email.result) == ("once", "confirmed", None)
    assert [row.kind for row in now.effects_of("r0")].count("email") == 1


@pytest.mark.parametrize("events", [CALM, RESUMED], ids=["calm", "resumed"])
def test_a_runtime_that_leaves_a_null_result_unanswered_is_caught(
    inprocess_runner: InProcessRunner, monkeypatch: pytest.MonkeyPatch, events: list[Event]
) -> None:
    monkeypatch.setattr(conversation, "_answer_messages", _unanswered)
    with pytest.raises((Violation, Violations), match="not answered"):
        inprocess_runner.replay(events)


def test_only_a_once_call_that_acted_may_be_confirmed_without_an_id(
    inprocess_runner: InProcessRunner,
) -> None:
    """`_confirms_true` takes a null result as the once email's whole answer when the desk
    holds the email, and as nothing else: a checked call confirmed with null, or a once
    call with null and no email at the desk, is a divergence still."""
    inprocess_runner.replay(CALM)
    now = inprocess_runner.observe()
    assert _confirms_true(now) == []
    email = now.calls["r0"][2]
    checked = {**now.calls, "r0": {**now.calls["r0"], 2: replace(email, effect="checked")}}
    (found,) = _confirms_true(replace(now, calls=checked))
    assert "confirmed with result None (created)" in str(found)
    unsent = [row for row in now.effects if row.key != email.key]
    (found,) = _confirms_true(replace(now, effects=unsent))
    assert f"the remote holds nothing under {email.key}" in str(found)
