"""The mock model's Chat Completions face, driven by the official `openai` client.

The client is nobody's code here, so a conversation it can hold proves the wire
format: tool definitions, assistant `tool_calls`, `role: tool` results, final
text, the error shape, and what each fault knob looks like from its side.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest

from mock_remotes import MockServers, Model, model_transport
from mock_remotes.chatrequest import DEFAULT_RUN
from mock_remotes.cloudrecords import Kind, validate_args
from mock_remotes.errors import InvalidArgs

SERVER_RESULT = {"id": "i-0000007", "kind": "server", "status": "created", "ip": "10.0.0.7"}
RESULTS: dict[str, dict[str, Any]] = {
    "create_server": SERVER_RESULT,
    "create_database": {"id": "db-0000003", "kind": "database", "status": "created"},
    "create_dns_record": {"id": "dns-0000002", "kind": "dns_record", "status": "created"},
}
KIND_OF: dict[str, Kind] = {
    "create_server": "server",
    "create_database": "database",
    "create_dns_record": "dns_record",
}
PARAMETERS = {
    "create_server": {"name": "string", "size": ["small", "medium", "large"], "region": "string"},
    "create_database": {"name": "string", "engine": ["postgres", "mysql"], "server_id": "string"},
    "create_dns_record": {"name": "string", "type": ["A", "CNAME"], "value": "string"},
}
PROMPT = [
    {"role": "system", "content": "You provision infrastructure."},
    {"role": "user", "content": "Give me a web app with a database."},
]


def function(name: str, parameters: dict[str, Any]) -> dict[str, Any]:
    properties = {
        arg: {"type": "string", "enum": kind} if isinstance(kind, list) else {"type": kind}
        for arg, kind in parameters.items()
    }
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": f"{name} in the mock cloud",
            "parameters": {
                "type": "object",
                "properties": properties,
                "required": list(parameters),
                "additionalProperties": False,
            },
        },
    }


TOOLS = [function(name, parameters) for name, parameters in PARAMETERS.items()]


def client_for(http_client: httpx.Client, base_url: str) -> openai.OpenAI:
    return openai.OpenAI(
        api_key="not-needed", base_url=base_url, http_client=http_client, max_retries=0
    )


@pytest.fixture
def llm(model: Model) -> Iterator[openai.OpenAI]:
    """The official client over the in-process transport of a fresh model."""
    with httpx.Client(transport=model_transport(model)) as http_client:
        yield client_for(http_client, "http://model/v1")


@pytest.fixture(params=["in-process", "uvicorn"])
def any_llm(request: pytest.FixtureRequest) -> Iterator[tuple[openai.OpenAI, httpx.Client]]:
    """The official client, and a plain one for the counters, over each way to the model."""
    if request.param == "in-process":
        model = Model()
        with httpx.Client(transport=model_transport(model), base_url="http://model") as plain:
            yield client_for(plain, "http://model/v1"), plain
        return
    servers: MockServers = request.getfixturevalue("mock_servers")
    servers.reset()
    with httpx.Client(base_url=servers.model_url) as plain:
        yield client_for(plain, f"{servers.model_url}/v1"), plain


def ask(llm: openai.OpenAI, messages: list[dict[str, Any]], **options: Any) -> Any:
    options.setdefault("model", "mock-provisioner")
    options.setdefault("tools", TOOLS)
    options.setdefault("user", "run")
    if options["user"] is None:
        del options["user"]  # the request names no run in its body
    return llm.chat.completions.create(messages=messages, **options)


def converse(
    llm: openai.OpenAI, *, results: dict[str, dict[str, Any]] = RESULTS, **options: Any
) -> tuple[list[Any], list[dict[str, Any]]]:
    """Answer every tool call with its canned result until the model answers text."""
    messages = list(PROMPT)
    answers = []
    while len(answers) < 10:
        answer = ask(llm, messages, **options)
        answers.append(answer)
        message = answer.choices[0].message
        if not message.tool_calls:
            return answers, messages
        messages.append(message.model_dump(exclude_none=True))
        for call in message.tool_calls:
            result = results[call.function.name]
            messages.append(
                {"role": "tool", "tool_call_id": call.id, "content": json.dumps(result)}
            )
    raise AssertionError("the conversation did not end")


def calls_of(answer: Any) -> list[tuple[str, dict[str, Any]]]:
    return [
        (c.function.name, json.loads(c.function.arguments))
        for c in answer.choices[0].message.tool_calls
    ]


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


# -- refusals, in the OpenAI error shape ---------------------------------------------------------


def body(**changes: Any) -> dict[str, Any]:
    request = {"model": "mock-provisioner", "messages": PROMPT, "tools": TOOLS, "user": "run"}
    request.update(changes)
    return {k: v for k, v in request.items() if v is not None}


def server_asked(result: object, call_id: str = "call_x") -> list[dict[str, Any]]:
    """A conversation whose create_server call was answered with `result`."""
    call = {
        "id": call_id,
        "type": "function",
        "function": {"name": "create_server", "arguments": "{}"},
    }
    content = result if isinstance(result, str) else json.dumps(result)
    return [
        *PROMPT,
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": call_id, "content": content},
    ]


UNANSWERED = [
    *PROMPT,
    {
        "role": "assistant",
        "tool_calls": [
            {
                "id": "c1",
                "type": "function",
                "function": {"name": "create_server", "arguments": "{}"},
            }
        ],
    },
]


@pytest.mark.parametrize(
    ("request_body", "param", "code"),
    [
        pytest.param([], None, "invalid_type", id="not-an-object"),
        pytest.param(body(model=None), "model", "missing_required_parameter", id="no-model"),
        pytest.param(
            body(messages=None), "messages", "missing_required_parameter", id="no-messages"
        ),
        pytest.param(
            body(messages=[{"role": "robot"}]), "messages[0].role", "invalid_value", id="role"
        ),
        pytest.param(body(tools=None), "tools", "tool_not_offered", id="no-tools"),
        pytest.param(body(tools=TOOLS[:2]), "tools", "tool_not_offered", id="tool-missing"),
        pytest.param(
            body(tools=[function("create_server", {"name": "string"}), *TOOLS[1:]]),
            "tools",
            "tool_schema_mismatch",
            id="schema-lacks-args",
        ),
        pytest.param(
            body(
                tools=[
                    function("create_server", {**PARAMETERS["create_server"], "zone": "string"}),
                    *TOOLS[1:],
                ]
            ),
            "tools",
            "tool_schema_mismatch",
            id="schema-requires-more",
        ),
        pytest.param(body(tools=[*TOOLS, TOOLS[0]]), "tools[3]", "invalid_value", id="tool-twice"),
        pytest.param(
            body(tools=[{"type": "custom"}]), "tools[0]", "invalid_value", id="not-a-function"
        ),
        pytest.param(body(messages=UNANSWERED), "messages", "invalid_value", id="unanswered-call"),
        pytest.param(
            body(
                messages=[
                    *UNANSWERED,
                    {"role": "user", "content": "well?"},
                    {"role": "tool", "tool_call_id": "c1", "content": json.dumps(SERVER_RESULT)},
                ]
            ),
            "messages",
            "invalid_value",
            id="user-before-the-answer",
        ),
        pytest.param(
            body(messages=[*PROMPT, {"role": "tool", "tool_call_id": "nope", "content": "{}"}]),
            "messages[2].tool_call_id",
            "invalid_value",
            id="answer-to-nothing",
        ),
        pytest.param(
            body(messages=server_asked("created it")),  # text is read, but holds no id
            "messages",
            "invalid_value",
            id="result-text-without-the-server-id",
        ),
        pytest.param(
            body(messages=server_asked(["i-1"])),  # read as a value, which holds no id
            "messages",
            "invalid_value",
            id="result-list-without-the-server-id",
        ),
        pytest.param(
            body(messages=server_asked({"status": "created"})),
            "messages",
            "invalid_value",
            id="server-without-id",
        ),
        pytest.param(body(user=7), "user", "invalid_type", id="user-not-a-string"),
        pytest.param(body(stream=True), "stream", "unsupported_value", id="stream"),
        pytest.param(body(n=2), "n", "unsupported_value", id="several-choices"),
        pytest.param(
            body(parallel_tool_calls="yes"), "parallel_tool_calls", "invalid_type", id="parallel"
        ),
        pytest.param(body(tool_choice="always"), "tool_choice", "invalid_value", id="tool-choice"),
        pytest.param(
            body(tool_choice={"type": "function", "function": {"name": "create_database"}}),
            "tool_choice",
            "invalid_value",
            id="tool-choice-not-next",
        ),
        pytest.param(
            body(tool_choice={"type": "function", "function": {"name": "reboot"}}),
            "tool_choice",
            "invalid_value",
            id="tool-choice-not-offered",
        ),
    ],
)
def test_a_request_the_model_cannot_answer_is_refused_with_400_and_not_counted(
    model_http: httpx.Client, model: Model, request_body: object, param: str | None, code: str
) -> None:
    response = model_http.post("/v1/chat/completions", json=request_body)

    assert response.status_code == 400
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert (error["type"], error["param"], error["code"]) == ("invalid_request_error", param, code)
    assert error["message"]
    assert model.call_counts()["total"] == 0


def test_a_body_that_is_not_json_is_refused_in_the_openai_shape(model_http: httpx.Client) -> None:
    response = model_http.post("/v1/chat/completions", content=b"model=mock-provisioner")

    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid_json"


def test_an_unknown_model_is_a_404_the_client_raises_as_not_found(
    llm: openai.OpenAI, model: Model
) -> None:
    with pytest.raises(openai.NotFoundError) as refused:
        ask(llm, PROMPT, model="gpt-4o")

    assert refused.value.code == "model_not_found"
    assert "mock-provisioner" in refused.value.message
    assert model.call_counts()["total"] == 0


def test_a_missing_tool_reaches_the_client_as_a_bad_request_naming_it(llm: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as refused:
        ask(llm, PROMPT, tools=TOOLS[:1])

    assert refused.value.code == "tool_not_offered"
    assert "create_database, create_dns_record" in refused.value.message


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


def test_invalid_args_on_a_parallel_answer_spoils_only_its_first_call(
    llm: openai.OpenAI, model: Model
) -> None:
    model.set_faults(invalid_args=1)

    calls = calls_of(ask(llm, server_asked(SERVER_RESULT), model="mock-provisioner-parallel"))

    assert calls[0] == (
        "create_database",
        {"name": "db-1", "engine": "oracle", "server_id": "i-0000007"},
    )
    validate_args("dns_record", calls[1][1])


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
