"""The mock model's fault knobs as the official `openai` client sees them.

Malformed answers, calls of a tool that was not offered, arguments that break the tool
schema, and latency past the client's timeout: each served in turn, across both
protocols, in process and under uvicorn, and each counted as a call.
"""

from __future__ import annotations

import json

import httpx
import openai
import pytest

from mock_remotes import MockServers, Model
from mock_remotes.cloudrecords import validate_args
from mock_remotes.errors import InvalidArgs

from .chat_client import (
    PROMPT,
    SERVER_RESULT,
    TOOLS,
    ask,
    calls_of,
    client_for,
    converse,
    function,
    server_asked,
)

# -- fault knobs, as the client sees them ---------------------------------------------------------


def test_malformed_answers_take_turns_breaking_the_json_the_choices_and_the_arguments(
    llm: openai.OpenAI, model: Model
) -> None:
    model.set_faults(malformed=3)

    with pytest.raises(json.JSONDecodeError):
        ask(llm, PROMPT)
    choiceless = ask(llm, PROMPT)
    broken_args = ask(llm, PROMPT)
    healthy = ask(llm, PROMPT)

    assert choiceless.choices is None
    call = broken_args.choices[0].message.tool_calls[0]
    assert call.function.name == "create_server"
    with pytest.raises(json.JSONDecodeError):
        json.loads(call.function.arguments)
    assert calls_of(healthy)[0][1]["name"] == "srv-4"
    assert model.calls("run") == 4


def test_a_malformed_final_answer_has_no_choices_to_read(llm: openai.OpenAI, model: Model) -> None:
    _, messages = converse(llm)
    model.set_faults(malformed=3)
    answers = []
    for _ in range(3):
        try:
            answers.append(ask(llm, messages))
        except json.JSONDecodeError:
            answers.append(None)

    assert answers[0] is None
    assert answers[1].choices is None
    assert answers[2].choices == []


def test_unknown_tool_answers_call_a_function_that_was_not_offered(
    llm: openai.OpenAI, model: Model
) -> None:
    model.set_faults(unknown_tool=1)

    spoiled = ask(llm, PROMPT)
    healthy = ask(llm, PROMPT)

    assert calls_of(spoiled) == [("delete_everything", {})]
    assert spoiled.choices[0].finish_reason == "tool_calls"
    assert calls_of(healthy)[0][0] == "create_server"


def test_unknown_tool_never_names_a_function_that_was_offered(
    llm: openai.OpenAI, model: Model
) -> None:
    model.set_faults(unknown_tool=1)
    tools = [*TOOLS, function("delete_everything", {})]

    assert calls_of(ask(llm, PROMPT, tools=tools))[0][0] == "delete_everything_too"


def test_invalid_args_answers_break_the_tool_schema_in_turn(
    llm: openai.OpenAI, model: Model
) -> None:
    model.set_faults(invalid_args=2)

    gigantic = calls_of(ask(llm, PROMPT))[0]
    nameless = calls_of(ask(llm, PROMPT))[0]

    assert gigantic[0] == nameless[0] == "create_server"
    assert gigantic[1]["size"] == "gigantic"
    assert "name" not in nameless[1]
    for _, args in (gigantic, nameless):
        with pytest.raises(InvalidArgs):
            validate_args("server", args)


def test_invalid_args_on_a_parallel_answer_spoils_its_last_call_then_its_first(
    llm: openai.OpenAI, model: Model
) -> None:
    """One call of several: the last the first time, the first the next (a runtime that
    numbers a refused call by its place in the answer is tried past the first place)."""
    model.set_faults(invalid_args=2)

    again = calls_of(ask(llm, server_asked(SERVER_RESULT), model="mock-provisioner-parallel"))
    calls = calls_of(ask(llm, server_asked(SERVER_RESULT), model="mock-provisioner-parallel"))

    assert [name for name, _ in calls] == ["create_database", "create_dns_record"]
    with pytest.raises(InvalidArgs):
        validate_args("database", calls[0][1])
    validate_args("dns_record", calls[1][1])
    assert [name for name, _ in again] == ["create_database", "create_dns_record"]
    validate_args("database", again[0][1])
    with pytest.raises(InvalidArgs):
        validate_args("dns_record", again[1][1])


def test_invalid_args_on_a_final_answer_calls_the_first_tool_with_nothing(
    llm: openai.OpenAI, model: Model
) -> None:
    _, messages = converse(llm)
    model.set_faults(invalid_args=1)

    assert calls_of(ask(llm, messages)) == [("create_server", {})]


def test_faults_are_served_in_order_across_both_protocols(
    model_http: httpx.Client, llm: openai.OpenAI, model: Model
) -> None:
    model.set_faults(malformed=1, unknown_tool=1, invalid_args=1)

    decided = model_http.post("/v1/decide", content=json.dumps({"run_id": "run", "history": []}))
    unknown = ask(llm, PROMPT)
    invalid = ask(llm, PROMPT)

    with pytest.raises(json.JSONDecodeError):
        decided.json()
    assert calls_of(unknown)[0][0] == "delete_everything"
    assert calls_of(invalid)[0][1]["size"] == "gigantic"
    assert model.calls("run") == 3
    assert model.faults.invalid_args == 0


def test_latency_beyond_the_client_timeout_counts_the_call_then_times_out(
    llm: openai.OpenAI, model: Model
) -> None:
    model.set_faults(latency=60)

    with pytest.raises(openai.APITimeoutError):
        ask(llm, PROMPT, timeout=1.0)

    assert model.calls("run") == 1


def test_the_uvicorn_model_serves_faults_on_chat_completions(mock_servers: MockServers) -> None:
    mock_servers.reset()
    mock_servers.set_model_faults(unknown_tool=1)
    with httpx.Client() as http_client:
        llm = client_for(http_client, f"{mock_servers.model_url}/v1")
        spoiled = ask(llm, PROMPT, user="uv-chat")
        healthy = ask(llm, PROMPT, user="uv-chat")

    assert calls_of(spoiled)[0][0] == "delete_everything"
    assert calls_of(healthy)[0][1]["name"] == "srv-2"
    assert mock_servers.calls("uv-chat") == 2
