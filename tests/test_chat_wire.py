"""What the model client puts on the wire, seen from the socket's side of httpx.

A worker with a real journal runs the provisioning plan (``mock-provisioner-parallel``)
against the mock model under uvicorn, or in-process where the socket adds nothing, with
every request recorded as it went out: the endpoint the base URL makes, the headers the
API key variables make, and the body: the model, the conversation (the system
instructions, the task, each answer with its tool calls, each ``role: tool`` result by
``tool_call_id``), the tools as functions with JSON Schema parameters, ``tool_choice``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import httpx
import pytest

from agent_runtime import config
from agent_runtime.config import Settings, from_env
from agent_runtime.errors import WrongEndpoint
from agent_runtime.loop.outcome import Outcome
from agent_runtime.loop.worker import Worker
from agent_runtime.store import clock, db
from agent_runtime.store.journal import Journal
from agent_runtime.tools.provisioning import INSTRUCTIONS
from mock_remotes import Cloud, MockServers, Model, cloud_transport, model_transport

from .agents import provisioning_parallel
from .recording import Recording

RUN = "wire"
PARALLEL = provisioning_parallel
TASK = PARALLEL.input


@pytest.fixture
def served(mock_servers: MockServers, database_url: str, conn: db.Connection) -> Any:
    """Runs PARALLEL on a connection of its own against the mocks under uvicorn."""
    mock_servers.reset()

    def run_with(settings: Settings, model: httpx.BaseTransport) -> Outcome:
        worker = Worker.open(
            settings, database_url, agents=PARALLEL, model_transport=model, heartbeat=False
        )
        try:
            return worker.run(RUN, agent=PARALLEL)
        finally:
            worker.close()

    return mock_servers, run_with


def in_process(
    conn: db.Connection, tmp_path: Path, settings: Settings, model: httpx.BaseTransport
) -> Outcome:
    """One run of PARALLEL on ``conn``, the cloud in-process."""
    with Cloud(tmp_path / "cloud.sqlite3") as cloud:
        worker = Worker.build(
            Journal(conn),
            settings,
            agents=PARALLEL,
            transports={"model": model, "cloud": cloud_transport(cloud)},
        )
        try:
            return worker.run(RUN, agent=PARALLEL)
        finally:
            worker.close_clients()


def over_sockets(servers: MockServers, base: str, env: Mapping[str, str]) -> Settings:
    return from_env({"MODEL_URL": base, "CLOUD_URL": servers.cloud_url, **env})


def test_every_request_is_a_chat_completion_with_the_conversation_so_far(
    served: Any, conn: db.Connection
) -> None:
    servers, run_with = served
    wire = Recording(httpx.HTTPTransport())
    settings = over_sockets(servers, f"{servers.model_url}/v1", {"MODEL_API_KEY": "sk-wire-1"})
    assert run_with(settings, wire).llm_calls == 3

    assert [(e.method, e.url) for e in wire.exchanges] == [
        ("POST", f"{servers.model_url}/v1/chat/completions")
    ] * 3
    for exchange in wire.exchanges:
        assert exchange.headers["authorization"] == "Bearer sk-wire-1"
        assert exchange.headers["content-type"] == "application/json"
    first, second, third = wire.chat_bodies()
    assert set(first) == {"model", "messages", "tools", "tool_choice", "user"}
    assert (first["model"], first["tool_choice"], first["user"]) == (
        "mock-provisioner-parallel",
        "auto",
        RUN,
    )
    assert first["messages"] == [
        {"role": "system", "content": INSTRUCTIONS},
        {"role": "user", "content": TASK},
    ]
    assert {k: v for k, v in second.items() if k != "messages"} == {
        k: v for k, v in first.items() if k != "messages"
    }
    # The first answer comes back as the assistant message it was, then its result.
    answer = wire.exchanges[0].answer_json()["choices"][0]["message"]
    (call,) = answer["tool_calls"]
    assert second["messages"][:2] == first["messages"]
    assistant, result = second["messages"][2:]
    assert assistant["role"] == "assistant" and assistant["tool_calls"] == [call]
    assert call["type"] == "function" and call["function"]["name"] == "create_server"
    assert isinstance(call["function"]["arguments"], str)  # a JSON text, as on the wire
    assert result["role"] == "tool" and result["tool_call_id"] == call["id"]
    server = json.loads(result["content"])
    assert server["kind"] == "server" and server["status"] == "created"
    (row,) = conn.execute(
        "SELECT result FROM tool_calls WHERE run_id = %s AND seq = 0", (RUN,)
    ).fetchall()
    assert server == row["result"]  # what the journal confirmed, nothing else
    assert [m["role"] for m in third["messages"]] == [
        "system",
        "user",
        "assistant",
        "tool",
        "assistant",
        "tool",
        "tool",
    ]


def test_the_tools_are_offered_as_functions_with_json_schema_parameters(
    conn: db.Connection, tmp_path: Path
) -> None:
    wire = Recording(model_transport(Model()))
    in_process(conn, tmp_path, Settings(model_url="http://model/v1"), wire)
    tools = wire.chat_bodies()[0]["tools"]
    assert [(t["type"], t["function"]["name"]) for t in tools] == [
        ("function", "create_server"),
        ("function", "create_database"),
        ("function", "create_dns_record"),
    ]
    server = tools[0]["function"]
    assert server["description"].startswith("Create a server")
    schema = server["parameters"]
    assert schema["type"] == "object"
    assert sorted(schema["required"]) == ["name", "region", "size"]
    assert schema["properties"]["size"]["enum"] == ["small", "medium", "large"]
    assert schema["properties"]["name"]["type"] == "string"
    assert schema["properties"]["name"]["maxLength"] == 200
    engine = tools[1]["function"]["parameters"]["properties"]["engine"]
    assert engine["enum"] == ["postgres", "mysql"]


@pytest.mark.parametrize(
    ("env", "authorization"),
    [
        ({"MODEL_API_KEY": "sk-model"}, "Bearer sk-model"),
        ({"OPENAI_API_KEY": "sk-openai"}, "Bearer sk-openai"),
        ({"MODEL_API_KEY": "sk-model", "OPENAI_API_KEY": "sk-openai"}, "Bearer sk-model"),
        ({"MODEL_API_KEY": "", "OPENAI_API_KEY": "sk-openai"}, "Bearer sk-openai"),
        ({}, None),
    ],
)
def test_the_api_key_comes_from_the_environment_as_a_bearer_token(
    env: dict[str, str], authorization: str | None, conn: db.Connection, tmp_path: Path
) -> None:
    wire = Recording(model_transport(Model()))
    in_process(conn, tmp_path, from_env({"MODEL_URL": "http://model/v1", **env}), wire)
    assert [e.headers.get("authorization") for e in wire.exchanges] == [authorization] * 3


def test_model_name_from_the_environment_overrides_the_agents_model(
    conn: db.Connection, tmp_path: Path
) -> None:
    wire = Recording(model_transport(Model()))
    settings = from_env({"MODEL_URL": "http://model/v1", "MODEL_NAME": "mock-provisioner"})
    outcome = in_process(conn, tmp_path, settings, wire)
    assert {b["model"] for b in wire.chat_bodies()} == {"mock-provisioner"}
    assert outcome.llm_calls == 4  # that plan calls one tool per answer


@pytest.mark.parametrize("suffix", ["/v1", "/v1/"])
def test_a_base_url_ending_in_v1_reaches_chat_completions(suffix: str, served: Any) -> None:
    servers, run_with = served
    wire = Recording(httpx.HTTPTransport())
    settings = over_sockets(servers, servers.model_url + suffix, {})
    assert run_with(settings, wire).status == "done"
    assert {e.path for e in wire.exchanges} == {"/v1/chat/completions"}


@pytest.mark.usefixtures("frozen_clock")
def test_a_base_url_without_v1_is_a_wrong_endpoint_that_stops_the_run_resumably(
    served: Any, conn: db.Connection
) -> None:
    servers, run_with = served
    wire = Recording(httpx.HTTPTransport())
    with pytest.raises(WrongEndpoint, match=r"404 not_found to POST /chat/completions.*MODEL_URL"):
        run_with(over_sockets(servers, servers.model_url, {}), wire)
    assert [(e.path, e.status) for e in wire.exchanges] == [("/chat/completions", 404)]
    _stopped_without_a_trace(conn)
    clock.advance(conn, config.RUN_BACKOFF_CAP)
    fixed = over_sockets(servers, f"{servers.model_url}/v1", {})
    assert run_with(fixed, httpx.HTTPTransport()).status == "done"


def _stopped_without_a_trace(conn: db.Connection) -> None:
    journaled = conn.execute(
        "SELECT (SELECT count(*) FROM decisions WHERE run_id = %(r)s) AS decisions,"
        " (SELECT count(*) FROM model_answers WHERE run_id = %(r)s) AS answers",
        {"r": RUN},
    ).fetchone()
    assert journaled == {"decisions": 0, "answers": 0}
    run: Any = conn.execute("SELECT status, owner, failure FROM runs WHERE id = %s", (RUN,))
    row = run.fetchone()
    assert (row["status"], row["owner"]) == ("running", None)
    assert row["failure"].startswith("WrongEndpoint: ")


@pytest.mark.parametrize("ids", ["none", "one twice"])
def test_tool_calls_without_ids_of_their_own_get_ids_their_results_answer(
    ids: str, conn: db.Connection, tmp_path: Path
) -> None:
    inner = model_transport(Model())
    answered_so_far = []

    def spoil(request: httpx.Request) -> httpx.Response:
        plain = inner.handle_request(request)
        body = json.loads(plain.read())
        answered_so_far.append(plain.status_code)
        if plain.status_code == 200:
            for call in body["choices"][0]["message"].get("tool_calls") or []:
                if ids == "none":
                    del call["id"]
                else:  # every call of one answer shares one id
                    call["id"] = f"call_{len(answered_so_far)}"
        return httpx.Response(plain.status_code, json=body)

    wire = Recording(httpx.MockTransport(spoil))
    outcome = in_process(conn, tmp_path, Settings(model_url="http://model/v1"), wire)
    assert (outcome.status, outcome.llm_calls) == ("done", 3)  # the mock took every request
    assert [e.status for e in wire.exchanges] == [200, 200, 200]
    messages = wire.chat_bodies()[2]["messages"]
    asked = [c["id"] for m in messages if m["role"] == "assistant" for c in m["tool_calls"]]
    answered = [m["tool_call_id"] for m in messages if m["role"] == "tool"]
    assert len(set(asked)) == 3 and answered == asked
    decisions = conn.execute(
        "SELECT call_id FROM decisions WHERE run_id = %s AND tool <> 'done' ORDER BY seq", (RUN,)
    ).fetchall()
    assert [d["call_id"] for d in decisions] == asked  # the journal keeps the ids it answered
