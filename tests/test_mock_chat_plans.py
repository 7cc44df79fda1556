"""The mock model's provisioning plans, as the official `openai` client holds them.

The client is nobody's code here, so a conversation it can hold proves the wire
format: tool definitions, assistant `tool_calls`, `role: tool` results, final text,
one call count for both protocols, the run named by the request, and `tool_choice`.
Refusals are in test_mock_chat_refusals.py, the fault knobs in test_mock_chat_faults.py.
"""

from __future__ import annotations

import json

import httpx
import openai
import pytest

from mock_remotes import Model, model_transport
from mock_remotes.chatrequest import DEFAULT_RUN
from mock_remotes.cloudrecords import validate_args

from .chat_client import (
    KIND_OF,
    PROMPT,
    SERVER_RESULT,
    ask,
    calls_of,
    client_for,
    converse,
    server_asked,
)

# -- the plan, over both ways to the model ------------------------------------------------------


def test_a_provisioning_conversation_ends_with_a_final_answer_after_three_tool_calls(
    any_llm: tuple[openai.OpenAI, httpx.Client],
) -> None:
    llm, plain = any_llm

    answers, _ = converse(llm)

    assert [calls_of(a) for a in answers[:3]] == [
        [("create_server", {"name": "srv-1", "size": "small", "region": "local-1"})],
        [("create_database", {"name": "db-2", "engine": "postgres", "server_id": "i-0000007"})],
        [("create_dns_record", {"name": "app-3.example.test", "type": "A", "value": "10.0.0.7"})],
    ]
    assert [a.choices[0].finish_reason for a in answers] == ["tool_calls"] * 3 + ["stop"]
    final = answers[3].choices[0].message
    assert final.tool_calls is None
    assert final.content == (
        "All done (call #4): server srv-1 (i-0000007), database db-2 (db-0000003), "
        "DNS record app-3.example.test (dns-0000002)."
    )
    assert all(a.object == "chat.completion" and a.model == "mock-provisioner" for a in answers)
    assert all(
        a.usage.total_tokens == a.usage.prompt_tokens + a.usage.completion_tokens for a in answers
    )
    assert answers[1].usage.prompt_tokens > answers[0].usage.prompt_tokens
    assert plain.get("/v1/calls/run").json() == {"run_id": "run", "calls": 4}


def test_a_parallel_plan_answers_the_database_and_the_dns_record_together(
    any_llm: tuple[openai.OpenAI, httpx.Client],
) -> None:
    llm, plain = any_llm

    answers, messages = converse(llm, model="mock-provisioner-parallel")

    assert len(answers) == 3
    assert calls_of(answers[1]) == [
        ("create_database", {"name": "db-2", "engine": "postgres", "server_id": "i-0000007"}),
        ("create_dns_record", {"name": "app-2.example.test", "type": "A", "value": "10.0.0.7"}),
    ]
    ids = [c.id for a in answers[:2] for c in a.choices[0].message.tool_calls]
    assert len(set(ids)) == 3
    assert [m["tool_call_id"] for m in messages if m["role"] == "tool"] == ids
    assert answers[2].choices[0].message.content.startswith("All done (call #3)")
    assert plain.get("/v1/calls/run").json()["calls"] == 3


def test_every_provisioning_call_passes_the_cloud_argument_checks() -> None:
    for plan in ("mock-provisioner", "mock-provisioner-parallel"):
        with httpx.Client(transport=model_transport(Model())) as http_client:
            answers, _ = converse(client_for(http_client, "http://m/v1"), model=plan)
        for answer in answers[:-1]:
            for name, args in calls_of(answer):
                validate_args(KIND_OF[name], args)


def test_parallel_tool_calls_false_makes_the_parallel_plan_answer_one_call_at_a_time(
    llm: openai.OpenAI,
) -> None:
    answers, _ = converse(llm, model="mock-provisioner-parallel", parallel_tool_calls=False)

    assert [len(a.choices[0].message.tool_calls or []) for a in answers] == [1, 1, 1, 0]


def test_asking_again_about_the_same_step_shows_the_second_call_in_the_name(
    llm: openai.OpenAI, model: Model
) -> None:
    first = ask(llm, PROMPT)
    second = ask(llm, PROMPT)

    assert calls_of(first)[0][1]["name"] == "srv-1"
    assert calls_of(second)[0][1]["name"] == "srv-2"
    assert first.choices[0].message.tool_calls[0].id != second.choices[0].message.tool_calls[0].id
    assert model.calls("run") == 2


def test_tool_call_ids_derive_from_the_run_and_its_call_count(model: Model) -> None:
    def ids(run: str) -> list[str]:
        with httpx.Client(transport=model_transport(model)) as http_client:
            answers, _ = converse(
                client_for(http_client, "http://m/v1"), model="mock-provisioner-parallel", user=run
            )
        return [c.id for a in answers[:-1] for c in a.choices[0].message.tool_calls]

    first = ids("run-a")
    model.reset()

    assert ids("run-a") == first
    assert set(ids("run-b")).isdisjoint(first)


def test_a_failed_call_reported_as_an_error_is_asked_for_again(llm: openai.OpenAI) -> None:
    first = ask(llm, PROMPT)
    call = first.choices[0].message.tool_calls[0]
    failure = {"error": "injected_failure", "detail": "the cloud refused"}
    messages = [
        *PROMPT,
        first.choices[0].message.model_dump(exclude_none=True),
        {"role": "tool", "tool_call_id": call.id, "content": json.dumps(failure)},
    ]

    again = ask(llm, messages)

    assert calls_of(again) == [
        ("create_server", {"name": "srv-2", "size": "small", "region": "local-1"})
    ]


@pytest.mark.parametrize("content", ["null", "42", "done, nothing to report"])
def test_a_tool_result_that_is_not_an_object_is_read_as_any_server_reads_it(
    llm: openai.OpenAI, content: str
) -> None:
    first = ask(llm, PROMPT)
    server = first.choices[0].message.tool_calls[0]
    messages = [
        *PROMPT,
        first.choices[0].message.model_dump(exclude_none=True),
        {"role": "tool", "tool_call_id": server.id, "content": json.dumps(SERVER_RESULT)},
    ]
    second = ask(llm, messages)
    database = second.choices[0].message.tool_calls[0]
    messages += [
        second.choices[0].message.model_dump(exclude_none=True),
        {"role": "tool", "tool_call_id": database.id, "content": content},
    ]

    third = ask(llm, messages)  # a real server takes any text; the plan goes on

    assert [name for name, _ in calls_of(second)] == ["create_database"]
    assert [name for name, _ in calls_of(third)] == ["create_dns_record"]


def test_the_model_list_names_every_plan(llm: openai.OpenAI) -> None:
    names = [m.id for m in llm.models.list()]

    assert names == [
        "mock-provisioner",
        "mock-provisioner-parallel",
        "mock-support",
        "mock-support-parallel",
    ]


# -- one counter for both protocols ---------------------------------------------------------------


def test_decide_and_chat_completions_count_into_the_same_call_count(
    any_llm: tuple[openai.OpenAI, httpx.Client],
) -> None:
    llm, plain = any_llm

    decided = plain.post("/v1/decide", json={"run_id": "run", "history": []}).json()
    chatted = ask(llm, PROMPT)

    assert decided["args"]["name"] == "srv-1"
    assert calls_of(chatted)[0][1]["name"] == "srv-2"
    assert plain.get("/v1/calls/run").json() == {"run_id": "run", "calls": 2}
    assert plain.get("/v1/calls").json() == {"total": 2, "by_run": {"run": 2}}


# -- naming the run ------------------------------------------------------------------------------


def test_the_run_is_the_user_field_else_the_run_header_else_the_default(
    llm: openai.OpenAI, model: Model
) -> None:
    ask(llm, PROMPT, user="by-user")
    ask(llm, PROMPT, user=None, extra_headers={"X-Run-Id": "by-header"})
    ask(llm, PROMPT, user="same", extra_headers={"X-Run-Id": "same"})
    ask(llm, PROMPT, user=None)

    assert model.call_counts()["by_run"] == {
        "by-user": 1,
        "by-header": 1,
        "same": 1,
        DEFAULT_RUN: 1,
    }


def test_a_user_field_and_a_run_header_naming_different_runs_are_refused(
    llm: openai.OpenAI, model: Model
) -> None:
    with pytest.raises(openai.BadRequestError) as refused:
        ask(llm, PROMPT, user="one", extra_headers={"X-Run-Id": "other"})

    assert refused.value.param == "user"
    assert model.call_counts()["total"] == 0


# -- tool_choice -----------------------------------------------------------------------------------


def test_tool_choice_none_answers_text_and_counts_the_call(
    llm: openai.OpenAI, model: Model
) -> None:
    answer = ask(llm, PROMPT, tool_choice="none")

    message = answer.choices[0].message
    assert (message.tool_calls, answer.choices[0].finish_reason) == (None, "stop")
    assert message.content == "I would call create_server next (#1); tool_choice is none."
    assert model.calls("run") == 1


def test_a_named_tool_choice_narrows_a_parallel_answer_to_that_tool(llm: openai.OpenAI) -> None:
    messages = server_asked(SERVER_RESULT)
    choice = {"type": "function", "function": {"name": "create_dns_record"}}

    answer = ask(llm, messages, model="mock-provisioner-parallel", tool_choice=choice)

    assert calls_of(answer) == [
        ("create_dns_record", {"name": "app-1.example.test", "type": "A", "value": "10.0.0.7"})
    ]


def test_tool_choice_required_once_the_plan_is_finished_is_refused(llm: openai.OpenAI) -> None:
    _, messages = converse(llm)

    with pytest.raises(openai.BadRequestError) as refused:
        ask(llm, messages, tool_choice="required")

    assert refused.value.param == "tool_choice"
