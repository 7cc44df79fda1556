"""The mock model's support plan, with its tool calls run against the mock support desk.

The conversation is held by the official `openai` client; each tool call is carried
out on the desk the way the example agent's tools do it (the order looked up, the
ticket filed under `<run>:<seq>`, the email sent with message_id `<run>:<seq>`), and
its answer is fed back as a `role: tool` message.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest

from mock_remotes import MockServers, Model, Support, model_transport

SUPPORT_TOOLS = [
    {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {
                "type": "object",
                "properties": {arg: {"type": "string"} for arg in args},
                "required": list(args),
            },
        },
    }
    for name, description, args in (
        ("lookup_order", "Look an order up", ("order_id",)),
        ("file_ticket", "File a support ticket", ("order_id", "summary")),
        ("send_email", "Email a customer", ("to", "subject", "body")),
    )
]


def carry_out(desk: httpx.Client, run: str, seq: int, name: str, args: dict[str, Any]) -> Any:
    """What the example agent's tool does with one call, and the JSON it reports back."""
    if name == "lookup_order":
        return desk.get(f"/v1/orders/{args['order_id']}").json()
    if name == "file_ticket":
        return desk.post(
            "/v1/tickets", json=args, headers={"Idempotency-Key": f"{run}:{seq}"}
        ).json()
    if name == "send_email":
        return desk.post("/v1/messages", json={"message_id": f"{run}:{seq}", **args}).json()
    raise AssertionError(f"the model called {name}")


def converse(
    llm: openai.OpenAI,
    desk: httpx.Client,
    said: str,
    run: str = "help-1",
    model: str = "mock-support",
) -> tuple[list[tuple[str, dict[str, Any]]], str]:
    """Hold the whole conversation; the tool calls in order, and the final text."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a support agent."},
        {"role": "user", "content": said},
    ]
    calls: list[tuple[str, dict[str, Any]]] = []
    for _ in range(10):
        answer = llm.chat.completions.create(
            model=model, messages=messages, tools=SUPPORT_TOOLS, user=run
        )
        message = answer.choices[0].message
        if not message.tool_calls:
            assert answer.choices[0].finish_reason == "stop"
            return calls, message.content or ""
        messages.append(message.model_dump(exclude_none=True))
        for call in message.tool_calls:
            args = json.loads(call.function.arguments)
            calls.append((call.function.name, args))
            result = carry_out(desk, run, len(calls), call.function.name, args)
            messages.append(
                {"role": "tool", "tool_call_id": call.id, "content": json.dumps(result)}
            )
    raise AssertionError("the conversation did not end")


@pytest.fixture
def llm(model: Model) -> Iterator[openai.OpenAI]:
    with httpx.Client(transport=model_transport(model)) as http_client:
        yield openai.OpenAI(
            api_key="unused", base_url="http://model/v1", http_client=http_client, max_retries=0
        )


def test_the_support_plan_looks_up_files_a_ticket_and_emails_the_customer(
    llm: openai.OpenAI, support_http: httpx.Client, support: Support, model: Model
) -> None:
    calls, final = converse(llm, support_http, "Order A-1001 arrived broken")

    assert calls == [
        ("lookup_order", {"order_id": "A-1001"}),
        ("file_ticket", {"order_id": "A-1001", "summary": "Order A-1001 arrived broken (#2)"}),
        (
            "send_email",
            {
                "to": "ada@example.test",
                "subject": "Ticket T-0000001: your order A-1001 (#3)",
                "body": "Hello Ada Lovelace,\n\nwe are sorry about order A-1001. Ticket T-0000001 "
                "is open and we will get back to you shortly.\n",
            },
        ),
    ]
    assert final == "Filed ticket T-0000001 for order A-1001 and emailed ada@example.test (#4)."
    assert [t.key for t in support.tickets()] == ["help-1:2"]
    assert [d.message_id for d in support.deliveries()] == ["help-1:3"]
    assert model.calls("help-1") == 4


def test_the_parallel_support_plan_files_the_ticket_in_the_lookups_answer(
    llm: openai.OpenAI, support_http: httpx.Client, support: Support, model: Model
) -> None:
    calls, final = converse(llm, support_http, "Order A-1001 arrived broken", "help-2",
                            model="mock-support-parallel")  # fmt: skip

    assert [name for name, _ in calls] == ["lookup_order", "file_ticket", "send_email"]
    assert calls[1][1] == {"order_id": "A-1001", "summary": "Order A-1001 arrived broken (#1)"}
    assert calls[2][1]["subject"] == "Ticket T-0000001: your order A-1001 (#2)"
    assert final == "Filed ticket T-0000001 for order A-1001 and emailed ada@example.test (#3)."
    assert model.calls("help-2") == 3  # the lookup and the ticket came in one answer


def test_a_message_naming_no_order_gets_a_question_back(
    llm: openai.OpenAI, support_http: httpx.Client, support: Support
) -> None:
    calls, final = converse(llm, support_http, "My parcel arrived broken")

    assert calls == []
    assert final == "Which order is this about? Please name it, e.g. A-1001 (#1)."


def test_an_order_the_desk_does_not_know_ends_with_an_answer_saying_so(
    llm: openai.OpenAI, support_http: httpx.Client, support: Support
) -> None:
    calls, final = converse(llm, support_http, "Where is Z-9999?")

    assert calls == [("lookup_order", {"order_id": "Z-9999"})]
    assert final == "I could not find order Z-9999 (#2)."
    assert support.tickets() == []


def test_a_step_decided_twice_shows_its_second_call_count(
    llm: openai.OpenAI, support_http: httpx.Client, model: Model
) -> None:
    first = llm.chat.completions.create(
        model="mock-support",
        messages=[{"role": "user", "content": "Order B-2001: the lamp flickers"}],
        tools=SUPPORT_TOOLS,
        user="twice",
    )
    call = first.choices[0].message.tool_calls[0]
    messages = [
        {"role": "user", "content": "Order B-2001: the lamp flickers"},
        first.choices[0].message.model_dump(exclude_none=True),
        {
            "role": "tool",
            "tool_call_id": call.id,
            "content": json.dumps(support_http.get("/v1/orders/B-2001").json()),
        },
    ]

    summaries = []
    for _ in range(2):
        again = llm.chat.completions.create(
            model="mock-support", messages=messages, tools=SUPPORT_TOOLS, user="twice"
        )
        summaries.append(json.loads(again.choices[0].message.tool_calls[0].function.arguments))

    assert [s["summary"] for s in summaries] == [
        "Order B-2001: the lamp flickers (#2)",
        "Order B-2001: the lamp flickers (#3)",
    ]


def test_the_support_plan_is_refused_without_its_tools(llm: openai.OpenAI, model: Model) -> None:
    with pytest.raises(openai.BadRequestError) as refused:
        llm.chat.completions.create(
            model="mock-support",
            messages=[{"role": "user", "content": "Order A-1001 arrived broken"}],
            tools=SUPPORT_TOOLS[:2],
        )

    assert refused.value.code == "tool_not_offered"
    assert "send_email" in refused.value.message
    assert model.call_counts()["total"] == 0


def test_invalid_args_on_the_support_plan_break_the_first_argument_in_turn(
    llm: openai.OpenAI, model: Model
) -> None:
    model.set_faults(invalid_args=2)
    asked = [{"role": "user", "content": "Order A-1001 arrived broken"}]

    spoiled = [
        json.loads(
            llm.chat.completions.create(model="mock-support", messages=asked, tools=SUPPORT_TOOLS)
            .choices[0]
            .message.tool_calls[0]
            .function.arguments
        )
        for _ in range(2)
    ]

    assert spoiled == [{"order_id": 12345}, {}]


def test_the_support_plan_over_uvicorn_leaves_one_ticket_and_one_email(
    mock_servers: MockServers,
) -> None:
    mock_servers.reset()
    with httpx.Client() as plain, httpx.Client(base_url=mock_servers.support_url) as desk:
        llm = openai.OpenAI(
            api_key="unused",
            base_url=f"{mock_servers.model_url}/v1",
            http_client=plain,
            max_retries=0,
        )
        calls, final = converse(llm, desk, "Order A-1002 never arrived", run="uv-help")

    assert [name for name, _ in calls] == ["lookup_order", "file_ticket", "send_email"]
    assert calls[2][1]["to"] == "grace@example.test"
    assert final.startswith("Filed ticket T-0000001 for order A-1002")
    assert [t["key"] for t in mock_servers.tickets("uv-help")] == ["uv-help:2"]
    assert [d["message_id"] for d in mock_servers.deliveries()] == ["uv-help:3"]
    assert mock_servers.calls("uv-help") == 4
