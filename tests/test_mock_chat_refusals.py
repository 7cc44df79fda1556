"""What the mock model refuses on Chat Completions, in the OpenAI error shape.

A request it cannot answer is a 400 naming the parameter and a code, an unknown model a
404, and neither is counted as a call; the official `openai` client raises each as the
error a real server's would be.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import openai
import pytest

from mock_remotes import Model

from .chat_client import PARAMETERS, PROMPT, SERVER_RESULT, TOOLS, ask, function, server_asked

# -- refusals, in the OpenAI error shape ---------------------------------------------------------


def body(**changes: Any) -> dict[str, Any]:
    request = {"model": "mock-provisioner", "messages": PROMPT, "tools": TOOLS, "user": "run"}
    request.update(changes)
    return {k: v for k, v in request.items() if v is not None}


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
