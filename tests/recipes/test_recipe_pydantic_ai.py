"""Recipe: a Pydantic AI agent under conform, seen through the httpx capture.

The agent is left as it is: its model client and its tools' HTTP client are instrumented,
so every model call and every tool's POST is an effect. Here the model is the project's
mock (it speaks Chat Completions) and the tools call the mock cloud; point both at yours.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest

from crashresume import Context, conform

pytest.importorskip("pydantic_ai", reason="the recipe needs pydantic-ai-slim[openai]")

import httpx
import openai
from pydantic_ai import Agent
from pydantic_ai.models.openai import OpenAIChatModel, OpenAIChatModelSettings
from pydantic_ai.providers.openai import OpenAIProvider

from crashresume.adapters import http
from mock_remotes import Cloud, Model, cloud_transport
from mock_remotes.model import create_app


class Provisioner:
    """One Pydantic AI run per job: the model picks the tools, the tools call the cloud."""

    def __init__(self, ctx: Context, model: Model, cloud: Cloud) -> None:
        client = openai.AsyncOpenAI(base_url="http://model/v1", api_key="-", max_retries=0)
        http.instrument(client, inner=httpx.ASGITransport(app=create_app(model)))
        self.cloud = httpx.Client(
            base_url="http://cloud", transport=http.transport(cloud_transport(cloud))
        )
        provider = OpenAIProvider(openai_client=client)
        self.agent = Agent(OpenAIChatModel("mock-provisioner", provider=provider))
        for tool in (self.create_server, self.create_database, self.create_dns_record):
            self.agent.tool_plain(tool)

    def post(self, path: str, body: dict[str, str]) -> Any:
        key = {"Idempotency-Key": f"{body['name']}:{path}"}  # one resource per name and kind
        return self.cloud.post(path, json=body, headers=key).raise_for_status().json()

    def create_server(self, name: str, size: str, region: str) -> Any:
        return self.post("/v1/servers", {"name": name, "size": size, "region": region})

    def create_database(self, name: str, engine: str, server_id: str) -> Any:
        return self.post("/v1/databases", {"name": name, "engine": engine, "server_id": server_id})

    def create_dns_record(self, name: str, type: str, value: str) -> Any:
        return self.post("/v1/dns_records", {"name": name, "type": type, "value": value})

    def step(self, job: str) -> None:
        settings = OpenAIChatModelSettings(openai_user=job)  # the mock model's run id
        # asyncio.run closes its loop even when the start dies inside it (run_sync keeps one)
        asyncio.run(self.agent.run(f"Provision {job}.", model_settings=settings))


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


def test_a_pydantic_ai_run_that_dies_is_asked_again_from_the_start(make_agent: Any) -> None:
    report = conform(make_agent, inputs=["web"])

    # model, server, model, database, model, DNS record, model (the final answer)
    assert report.baseline_effects == 7
    # The agent keeps no history of its own: whatever the crash, the restart runs the job
    # again from its first model call (a duplicate of it), and as the mock model names what
    # it makes by its call count, the second run decides other names: what the crash-free
    # run made never happens (the last crash, after the final answer, loses nothing).
    duplicates = {f.scenario for f in report.findings if f.kind == "duplicate_effect"}
    lost = {f.scenario for f in report.findings if f.kind == "effect_lost"}
    # Dying before the first model call is the one crash that costs nothing.
    assert duplicates == set(report.scenarios) - {"run-before-1"}, str(report)
    assert lost == duplicates - {"run-7"}, str(report)
    first_call = "POST http://model/v1/chat/completions({'messages': [{'content': 'Provision web."
    assert all(
        f.message.startswith(first_call) for f in report.findings if f.kind == "duplicate_effect"
    )
