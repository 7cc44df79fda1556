"""A tool whose answer is ``None`` still answers its tool call in the conversation.

A Chat Completions server refuses a request in which an assistant's tool call has no
``role: tool`` message before the next turn. A tool that returns nothing (an email sent,
nothing to say) is confirmed with a null result; the conversation must still answer its
call, with ``null``, both as the run goes and when a resumed run rebuilds the
conversation from the journal.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from agent_runtime import Agent, Call, Tool, Wiring, tool
from agent_runtime.config import Settings
from agent_runtime.crash import CrashPlan, InjectedCrash, raise_crash
from agent_runtime.loop.outcome import Outcome
from agent_runtime.loop.worker import Worker
from agent_runtime.store import db
from agent_runtime.store.journal import Journal
from mock_remotes import Model, Support, model_transport, support_transport

from .agents import INSTRUCTIONS, TASK, desk_client, support_tools
from .recording import Recording


def _quiet_tools(wiring: Wiring) -> Sequence[Tool]:
    """The support tools, but the email's tool says nothing back once it is sent."""
    lookup, ticket, _ = support_tools(wiring, email="once")
    desk = desk_client(wiring)

    @tool(effect="once")
    def send_email(call: Call, to: str, subject: str, body: str) -> None:
        """Email the customer (one delivery per send)."""
        message = {"message_id": call.key, "to": to, "subject": subject, "body": body}
        desk.post("/v1/messages", json=message).raise_for_status()

    return [lookup, ticket, send_email]


QUIET = Agent(
    name="support-quiet",
    instructions=INSTRUCTIONS,
    input=TASK,
    tools=_quiet_tools,
    model="mock-support",
    protocol="chat",
)


def _worker(conn: db.Connection, desk: Support, wire: Recording, crash: CrashPlan) -> Worker:
    return Worker.build(
        Journal(conn),
        Settings(model_url="http://model/v1"),
        agents=QUIET,
        transports={"model": wire, "support": support_transport(desk)},
        crash=crash,
        sleep=lambda seconds: None,
    )


def _email_answers(wire: Recording) -> list[Any]:
    """What each request after the email said about the email's tool call."""
    found = []
    for exchange in wire.exchanges:
        messages = json.loads(exchange.body)["messages"]
        calls = {
            c["id"]: c["function"]["name"]
            for m in messages
            if m["role"] == "assistant"
            for c in m.get("tool_calls") or []
        }
        emails = [i for i, name in calls.items() if name == "send_email"]
        answered = {m["tool_call_id"]: m["content"] for m in messages if m["role"] == "tool"}
        found += [answered.get(i, "unanswered") for i in emails]
    return found


def test_a_tool_that_returns_nothing_is_answered_with_null_and_the_run_ends(
    conn: db.Connection, tmp_path: Path
) -> None:
    wire = Recording(model_transport(Model()))
    with Support(tmp_path / "desk.sqlite3") as desk:
        worker = _worker(conn, desk, wire, CrashPlan())
        try:
            outcome = worker.run("quiet", input=TASK)
        finally:
            worker.close_clients()
        assert len(desk.deliveries()) == 1
    assert isinstance(outcome, Outcome) and outcome.status == "done", outcome
    assert _email_answers(wire) == ["null"]


def test_a_resumed_run_answers_the_nothing_it_journaled_with_null(
    conn: db.Connection, tmp_path: Path
) -> None:
    wire = Recording(model_transport(Model()))
    with Support(tmp_path / "desk.sqlite3") as desk:
        first = _worker(
            conn, desk, wire, CrashPlan(point="after_confirm", seq=2, action=raise_crash)
        )
        try:
            with pytest.raises(InjectedCrash):
                first.run("quiet-resumed", input=TASK)
        finally:
            first.close_clients()
        again = _worker(conn, desk, wire, CrashPlan())
        try:
            outcome = again.run("quiet-resumed", takeover=True)
        finally:
            again.close_clients()
        assert len(desk.deliveries()) == 1  # confirmed before the crash: not sent again
    assert isinstance(outcome, Outcome) and outcome.status == "done", outcome
    assert _email_answers(wire) == ["null"]
