"""Recipe: an OpenAI Agents SDK agent under conform, seen through the httpx capture.

The agent is left as it is: its model client and its tools' HTTP client are instrumented,
so every model call and every tool's POST is an effect. Here the model is the project's
mock (it speaks Chat Completions, hence ``OpenAIChatCompletionsModel``) and the tools call
the mock cloud; point both at yours.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest

from crashresume import Context, conform

pytest.importorskip("agents", reason="the recipe needs openai-agents")

import httpx
import openai

from agents import (
    Agent,
    ModelSettings,
    OpenAIChatCompletionsModel,
    Runner,
    function_tool,
    set_tracing_disabled,
)
from crashresume.adapters import http
from mock_remotes import Cloud, Model, cloud_transport
from mock_remotes.model import create_app

set_tracing_disabled(True)  # traces would go to api.openai.com


class Provisioner:
    """One Agents SDK run per job: the model picks the tools, the tools call the cloud."""

    def __init__(self, ctx: Context, model: Model, cloud: Cloud) -> None:
        client = openai.AsyncOpenAI(base_url="http://model/v1", api_key="-", max_retries=0)
        http.instrument(client, inner=httpx.ASGITransport(app=create_app(model)))
        self.model = OpenAIChatCompletionsModel("mock-provisioner", openai_client=client)
        self.cloud = httpx.Client(
            base_url="http://cloud", transport=http.transport(cloud_transport(cloud))
        )

        def post(path: str, body: dict[str, str]) -> str:
            key = {"Idempotency-Key": f"{body['name']}:{path}"}  # one per name and kind
            return self.cloud.post(path, json=body, headers=key).raise_for_status().text

        @function_tool
        def create_server(name: str, size: str, region: str) -> str:
            """Create a server."""
            return post("/v1/servers", {"name": name, "size": size, "region": region})

        @function_tool
        def create_database(name: str, engine: str, server_id: str) -> str:
            """Create a database on a server."""
            return post("/v1/databases", {"name": name, "engine": engine, "server_id": server_id})

        @function_tool
        def create_dns_record(name: str, type: str, value: str) -> str:
            """Create a DNS record."""
            return post("/v1/dns_records", {"name": name, "type": type, "value": value})

        self.tools = [create_server, create_database, create_dns_record]

    def step(self, job: str) -> None:
        settings = ModelSettings(extra_args={"user": job})  # the mock model's run id
        agent = Agent(name="provisioner", model=self.model, tools=self.tools,
                      model_settings=settings)  # fmt: skip
        asyncio.run(Runner.run(agent, f"Provision {job}."))


@pytest.fixture
def make_agent(tmp_path: Path) -> Iterator[Any]:
    """A Provisioner per start; the model and the cloud are the scenario's own."""
    with ExitStack() as stack:
        models: dict[str, Model] = {}
        clouds: dict[str, Cloud] = {}

        def make(ctx: Context) -> Provisioner:
            if ctx.run_id not in clouds:
                clouds[ctx.run_id] = stack.enter_context(Cloud(tmp_path / f"{ctx.run_id}.db"))
            return Provisioner(ctx, models.setdefault(ctx.run_id, Model()), clouds[ctx.run_id])

        yield make


def test_an_agents_sdk_run_that_dies_is_asked_again_from_the_start(make_agent: Any) -> None:
    report = conform(make_agent, inputs=["web"])

    # model, server, model, database, model, DNS record, model (the final answer)
    assert report.baseline_effects == 7
    # The run keeps no history of its own (no session): whatever the crash, the restart runs
    # the job again from its first model call (a duplicate of it), and as the mock model
    # names what it makes by its call count, the second run decides other names: what the
    # crash-free run made never happens (the last crash, after the final answer, loses
    # nothing).
    duplicates = {f.scenario for f in report.findings if f.kind == "duplicate_effect"}
    lost = {f.scenario for f in report.findings if f.kind == "effect_lost"}
    # Dying before the first model call is the one crash that costs nothing.
    assert duplicates == set(report.scenarios) - {"run-before-1"}, str(report)
    assert lost == duplicates - {"run-7"}, str(report)
    first_call = "POST http://model/v1/chat/completions({'messages': [{'content': 'Provision web."
    assert all(
        f.message.startswith(first_call) for f in report.findings if f.kind == "duplicate_effect"
    )
