"""The asked invariant: the mock model keeps every question, and a run whose questions lose
the agent's instructions or the run's input is caught (mutation gap class 18)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from agent_runtime.llm import conversation, deciding, models

from .agents import suite_agents
from .events import Event
from .planting import caught_with_edit
from .questions import asked, asked_truly, opening, remakes
from .remotes import InProcessRemotes
from .runners import InProcessRunner
from .violations import Violation, Violations

SUPPORT = suite_agents("http://support")["support"]
PROVISIONING = suite_agents("http://support")["provisioning"]  # the seed's: ``decide``


def test_the_model_keeps_each_question_of_both_protocols_until_a_reset() -> None:
    remotes = InProcessRemotes()
    try:
        http = httpx.Client(base_url="http://model", transport=remotes.transports["model"])
        decide = {"run_id": "r0", "history": []}
        http.post("/v1/decide", json=decide).raise_for_status()
        tools = [
            {"type": "function", "function": {"name": name}}
            for name in ("lookup_order", "file_ticket", "send_email")
        ]
        chat = {"model": "mock-support", "user": "r1", "messages": opening(SUPPORT)}
        http.post("/v1/chat/completions", json={**chat, "tools": tools}).raise_for_status()
        http.post("/v1/decide", json={"history": []})  # refused: no question answered
        kept = asked(remotes)
        assert [(q["run_id"], q["protocol"]) for q in kept] == [("r0", "decide"), ("r1", "chat")]
        assert kept[0]["body"] == decide
        assert kept[1]["body"]["messages"] == opening(SUPPORT)
        assert http.get("/v1/questions").json()["questions"] == kept
        remotes.reset()
        assert asked(remotes) == []
    finally:
        remotes.close()


def _chat(run: str, messages: list[dict[str, Any]], answer: Any = None) -> dict[str, Any]:
    body = {"model": "mock-support", "user": run, "messages": messages}
    return {"run_id": run, "protocol": "chat", "body": body, "answer": answer}


def test_a_question_without_the_instructions_or_the_input_is_not_asked_truly() -> None:
    kinds, agents = {"r0": "support"}, {"support": SUPPORT}
    instructions, task = opening(SUPPORT)
    call = {"id": "call_1_0_ab", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    said = {"role": "assistant", "content": None, "refusal": None, "tool_calls": [call]}
    first = _chat("r0", [instructions, task], {"choices": [{"message": said}]})
    kept = {"role": "assistant", "content": None, "tool_calls": [call]}  # as journaled
    result = {"role": "tool", "tool_call_id": "call_1_0_ab", "content": "{}"}
    assert (
        asked_truly([first, _chat("r0", [instructions, task, kept, result])], kinds, agents) == []
    )
    assert asked_truly([_chat("r9", [task])], kinds, agents) == []  # not this schedule's run
    for messages in ([task], [instructions, {**task, "content": ""}]):
        (found,) = asked_truly([_chat("r0", messages)], kinds, agents)
        assert found.kind == "asked"
        assert "not the agent support's instructions" in str(found)
    remade = {**kept, "tool_calls": [{**call, "id": "call_0"}]}  # the runtime's own ids
    (found,) = asked_truly([first, _chat("r0", [instructions, task, remade])], kinds, agents)
    assert "no answer the model gave" in str(found)
    decide = {"run_id": "r0", "protocol": "decide", "body": {"run_id": "r1", "history": []}}
    (found,) = asked_truly([decide], {"r0": "provisioning"}, {"provisioning": PROVISIONING})
    assert "question 0 is" in str(found)


def _without_instructions(question: conversation.Question) -> list[dict[str, Any]]:
    return [m for m in conversation.opening(question) if m["role"] != "system"]


ANSWER_MESSAGES = conversation._answer_messages


def _remade(history: Any, decisions: list[Any]) -> list[dict[str, Any]]:
    """The mutant _answer_messages:6a9d690b, as a patch: each answer's message remade from
    its decisions (no content, the runtime's own call ids) instead of the model's."""
    return [conversation._assistant(decisions), *ANSWER_MESSAGES(history, decisions)[1:]]


@pytest.mark.parametrize("kind", ["support", "provisioning"])
def test_a_runtime_that_drops_the_instructions_is_caught(
    inprocess_runner: InProcessRunner, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    """The mutant conversation:opening:AddNot:024b0b52, as a patch: every chat question
    lacks its system message. The seed's protocol carries no instructions: unaffected."""
    events = [Event(op="start", run=0, agent=kind)]
    inprocess_runner.replay(events)
    monkeypatch.setattr(models, "opening", _without_instructions)
    if kind == "provisioning":
        inprocess_runner.replay(events)
        return
    with pytest.raises((Violation, Violations), match=r"\[asked\] run r0"):
        inprocess_runner.replay(events)


def test_a_runtime_that_remakes_the_models_answers_is_caught(
    inprocess_runner: InProcessRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    events = [Event(op="start", run=0, agent="support")]
    monkeypatch.setattr(conversation, "_answer_messages", _remade)
    with pytest.raises((Violation, Violations), match="no answer the model gave"):
        inprocess_runner.replay(events)


@pytest.mark.parametrize("slip", ["> ", "is "])
def test_a_question_in_another_protocol_than_its_agents_is_not_asked_truly(
    runner: InProcessRunner, monkeypatch: pytest.MonkeyPatch, slip: str
) -> None:
    """``model_for``'s ``== "decide"`` as its ``>`` (dfa23159) and ``is`` (fb6bd579)
    mutants have it: the seed's ``decide`` agent (its protocol as configuration gives it:
    equal to the literal, never the same object) is asked in Chat Completions, which the
    mock answers alike."""
    decide = {"run_id": "r0", "protocol": "decide", "body": {"run_id": "r0", "history": []}}
    (found,) = asked_truly([decide], {"r0": "support"}, {"support": SUPPORT})
    assert "came in the 'decide' protocol; the agent support speaks 'chat'" in str(found)
    old = '(s.model_protocol or agent.protocol) == "decide"'
    found_text = caught_with_edit(
        runner,
        (Event(op="start", run=0, agent="provisioning"),),
        monkeypatch,
        (deciding, old, old.replace("== ", slip)),
        take="Decider.model_for",
        put=(deciding.Decider, "model_for"),
    )
    assert "came in the 'chat' protocol; the agent provisioning speaks 'decide'" in found_text


def test_a_question_no_chat_server_answers_is_not_asked_truly() -> None:
    """A message without a known role, or a tool message that answers no call of the
    assistant message before it (or answers one twice), is refused by a real server."""
    kinds, agents = {"r0": "support"}, {"support": SUPPORT}
    instructions, task = opening(SUPPORT)
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    said = {"role": "assistant", "content": None, "tool_calls": [call]}
    first = _chat("r0", [instructions, task], {"choices": [{"message": said}]})
    result = {"role": "tool", "tool_call_id": "c1", "content": "{}"}
    assert (
        asked_truly([first, _chat("r0", [instructions, task, said, result])], kinds, agents) == []
    )
    for messages, why in (
        ([said, result, result], "message 4 answers 'c1', no call open before it"),
        ([result], "message 2 answers 'c1'"),
        ([{"tool": "f", "args": {}}], "message 2 has the role None"),
    ):
        (found,) = asked_truly([first, _chat("r0", [instructions, task, *messages])], kinds, agents)
        assert "no Chat Completions server answers" in str(found) and why in str(found)


def test_a_switched_runs_questions_may_come_in_its_configured_protocol() -> None:
    """A run whose workers a deployment switched to Chat Completions may be asked in
    either; a decide answer comes back as its remake (``call_<seq>``, the same arguments)
    and nothing else does."""
    kinds, agents = {"r0": "provisioning"}, {"provisioning": PROVISIONING}
    decide = {"run_id": "r0", "protocol": "decide", "body": {"run_id": "r0", "history": []}}
    instructions, task = opening(PROVISIONING)
    args = {"name": "srv-1", "size": "small"}
    row = {"run_id": "r0", "seq": 0, "tool": "create_server", "args": args, "llm_call": 1}
    remade = remakes([{**row, "call_id": None}])
    function = {"name": "create_server", "arguments": '{"size": "small", "name": "srv-1"}'}
    call = {"id": "call_0", "type": "function", "function": function}
    message = {"role": "assistant", "content": None, "tool_calls": [call]}
    result = {"role": "tool", "tool_call_id": "call_0", "content": "{}"}
    chat = _chat("r0", [instructions, task, message, result])
    (found,) = asked_truly([decide, chat], kinds, agents, {"r0": {None}}, remade)
    assert "came in the 'chat' protocol; the agent provisioning speaks 'decide'" in str(found)
    assert asked_truly([decide, chat], kinds, agents, {"r0": {None, "chat"}}, remade) == []
    other = {**call, "id": "call_1"}
    wrong = _chat("r0", [instructions, task, {**message, "tool_calls": [other]}])
    (found,) = asked_truly([wrong], kinds, agents, {"r0": {"chat"}}, remade)
    assert "no answer the model gave (nor the remake" in str(found)
