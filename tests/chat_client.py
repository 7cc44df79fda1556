"""The official `openai` client against the mock model's Chat Completions face.

Shared by the test_mock_chat_* modules: the provisioning tools as a client offers them
(`TOOLS`, built by `function`), the prompt, the canned tool results, and `converse`,
which answers every tool call until the model answers text. The fixtures that make a
client (`llm`, `any_llm`) are in tests/fix_mocks.py.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import openai

from mock_remotes.cloudrecords import Kind

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
