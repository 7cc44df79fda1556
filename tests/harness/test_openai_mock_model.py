"""The official openai client, seen by ``crashresume.adapters.http``, against the project's
own mock model (``mock_remotes.model_transport``) and mock cloud.

The mock model names what it creates by its call count (``srv-1``; ``srv-2`` when it is
asked twice), so asking it again for a step already decided is visible twice over: the
same request to ``POST /v1/chat/completions`` a second time (``duplicate_effect`` on the
model endpoint), and a server the crash-free run never made.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest

from crashresume import Context, conform

from .subjects import at, expect

httpx = pytest.importorskip("httpx", reason="the http adapter needs the httpx extra")
openai = pytest.importorskip("openai", reason="this test drives the official openai client")

from crashresume.adapters import http  # noqa: E402
from mock_remotes import Cloud, Model, cloud_transport, model_transport  # noqa: E402

MODEL_URL = "http://model/v1"
CHAT = f"POST {MODEL_URL}/chat/completions"
PATHS = {
    "create_server": "/v1/servers",
    "create_database": "/v1/databases",
    "create_dns_record": "/v1/dns_records",
}
ARGUMENTS = {
    "create_server": ("name", "size", "region"),
    "create_database": ("name", "engine", "server_id"),
    "create_dns_record": ("name", "type", "value"),
}
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": name,
            "parameters": {
                "type": "object",
                "properties": {arg: {"type": "string"} for arg in args},
                "required": list(args),
            },
        },
    }
    for name, args in ARGUMENTS.items()
]


class Provisioner:
    """Per job: ask the mock model for the next call, make it in the mock cloud (keyed by
    job and step), until the model answers with text.

    ``journal_first``: the answer is journaled before the cloud is called, and a restart
    replays it. ``keyed_model``: the model call carries an Idempotency-Key, so a crash
    between the answer and its journal entry gets the same answer back. Without both, a
    restart asks the model again for a step it had already decided.
    """

    journal_first = True
    keyed_model = True

    def __init__(self, ctx: Context, journal: dict[str, list[dict[str, Any]]], model: Model,
                 cloud: Cloud) -> None:  # fmt: skip
        self.journal = journal
        client = openai.OpenAI(base_url=MODEL_URL, api_key="test", max_retries=0)
        self.model = http.instrument(client, inner=model_transport(model))
        self.cloud = httpx.Client(
            base_url="http://cloud", transport=http.transport(cloud_transport(cloud))
        )

    def step(self, job: str) -> None:
        steps = self.journal.setdefault(job, [])
        while not (steps and steps[-1]["call"] is None):
            seq = len(steps)
            if steps and "result" not in steps[-1]:
                seq -= 1
                call = steps[-1]["call"]  # decided before the crash: replay it
            else:
                call = self.ask(job, steps)
                if self.journal_first or call is None:
                    steps.append({"call": call})
            if call is None:
                return
            answer = self.cloud.post(
                PATHS[call["function"]["name"]],
                json=json.loads(call["function"]["arguments"]),
                headers={"Idempotency-Key": f"{job}:{seq}"},
            )
            result = answer.raise_for_status().json()  # the resource: its id, its ip, ...
            if self.journal_first:
                steps[-1]["result"] = result
            else:
                steps.append({"call": call, "result": result})

    def ask(self, job: str, steps: list[dict[str, Any]]) -> dict[str, Any] | None:
        messages: list[Any] = [{"role": "user", "content": f"Provision {job}."}]
        for done in steps:
            call, result = done["call"], json.dumps(done["result"])
            messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": result})
        key = {"Idempotency-Key": f"{job}:{len(steps)}:model"} if self.keyed_model else {}
        answer = self.model.chat.completions.create(
            model="mock-provisioner", messages=messages, tools=TOOLS, user=job, extra_headers=key
        )
        calls = answer.choices[0].message.tool_calls
        if not calls:
            return None
        call = calls[0]
        return {
            "id": call.id,
            "type": "function",
            "function": {"name": call.function.name, "arguments": call.function.arguments},
        }


class AsksAgain(Provisioner):
    """Journals a step only once its call is made, and sends the model no key."""

    journal_first = False
    keyed_model = False


@pytest.fixture
def factory(tmp_path: Path) -> Iterator[Callable[[type[Provisioner]], Any]]:
    """``factory(Agent)``: a make_agent whose journal, model and cloud are the scenario's
    own (a restart finds them as it left them; another scenario starts from nothing)."""
    with ExitStack() as stack:

        def make(agent: type[Provisioner]) -> Any:
            journals: dict[str, dict[str, list[dict[str, Any]]]] = {}
            models: dict[str, Model] = {}
            clouds: dict[str, Cloud] = {}

            def make_agent(ctx: Context) -> Provisioner:
                if ctx.run_id not in clouds:
                    path = tmp_path / f"{agent.__name__}-{ctx.run_id}.sqlite3"
                    clouds[ctx.run_id] = stack.enter_context(Cloud(path))
                model = models.setdefault(ctx.run_id, Model())
                return agent(ctx, journals.setdefault(ctx.run_id, {}), model, clouds[ctx.run_id])

            return make_agent

        yield make


def test_an_agent_that_journals_each_answer_before_acting_passes_against_the_mock_model(
    factory: Callable[[type[Provisioner]], Any],
) -> None:
    report = conform(factory(Provisioner), inputs=["web"])

    assert report.passed, str(report)
    # model, server, model, database, model, DNS record, model (the final text)
    assert report.baseline_effects == 7


def test_asking_the_mock_model_again_for_a_decided_step_is_a_duplicate_on_its_endpoint(
    factory: Callable[[type[Provisioner]], Any],
) -> None:
    report = conform(factory(AsksAgain), inputs=["web"])

    # Effect calls: 1 model, 2 server, 3 model, 4 database, 5 model, 6 DNS record, 7 model.
    # Dying after an answer, or around the cloud call that follows it, loses the answer:
    # the restart sends the model the same request again.
    asked_again = {"run-1", "run-before-2", "run-2", "run-3", "run-before-4", "run-4", "run-5"}
    asked_again |= {"run-before-6", "run-6", "run-7"}
    duplicates = [f for f in report.findings if str(f.kind) == "duplicate_effect"]
    assert {f.scenario for f in duplicates} == asked_again, str(report)
    for finding in duplicates:
        assert finding.message.startswith(f"{CHAT}({{"), finding.message
        assert "happened 2 times, once in the baseline" in finding.message
    # The second answer is a new decision (srv-2 instead of srv-1, ...), so what the
    # crash-free run made never happens (but after the final answer, where nothing follows),
    # and where the cloud had already acted under the step's key, the new arguments come
    # under that key: the adapter answers with the first result, a key_conflict.
    acted = {"run-2", "run-4", "run-6"}
    assert at(report.findings) == (
        expect("duplicate_effect", asked_again)
        | expect("effect_lost", asked_again - {"run-7"})
        | expect("key_conflict", acted)
    )
