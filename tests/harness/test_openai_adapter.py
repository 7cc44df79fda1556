"""The official openai client under conform: a model call is an effect, a re-ask a duplicate.

The model here is an in-process mock of the Chat Completions wire format
(``POST /v1/chat/completions`` with tool calling), served through an httpx MockTransport.
``http.instrument(client, inner=...)`` works whichever HTTP module the installed openai
client is built on (httpx for 1.x and 2.x, httpx2 for 3.x).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from crashresume import Context, conform

from .subjects import at, expect

httpx = pytest.importorskip("httpx", reason="the http adapter needs the httpx extra")
openai = pytest.importorskip("openai", reason="this test drives the official openai client")

from crashresume.adapters import http  # noqa: E402

MODEL_URL = "http://model.test/v1"
TOOLS_URL = "http://tools.test"
PLAN = ["create_server", "create_database"]  # then the model answers without a tool call


def chat_completions(request: Any) -> Any:
    """The model: the next tool of PLAN after the tool results already in the messages."""
    if request.method != "POST" or request.url.path != "/v1/chat/completions":
        return httpx.Response(404, json={"error": {"message": "no such route"}})
    body = json.loads(request.content)
    done = sum(1 for message in body["messages"] if message["role"] == "tool")
    job = body["messages"][0]["content"]
    message: dict[str, Any] = {"role": "assistant", "content": None}
    finish = "tool_calls"
    if done < len(PLAN):
        arguments = json.dumps({"name": f"{job}-{PLAN[done]}"})
        call = {"name": PLAN[done], "arguments": arguments}
        message["tool_calls"] = [{"id": f"call_{done}", "type": "function", "function": call}]
    else:
        message["content"] = "done"
        finish = "stop"
    return httpx.Response(
        200,
        json={
            "id": f"chatcmpl-{job}-{done}",
            "object": "chat.completion",
            "created": 0,
            "model": body["model"],
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        },
    )


def tools(request: Any) -> Any:
    body = json.loads(request.content)
    return httpx.Response(201, json={"id": f"{request.url.path.strip('/')}:{body['name']}"})


class Provisioner:
    """Per job: ask the model for the next tool, call it (keyed by job and step), repeat.

    ``journal_first``: the model's answer is journaled before the tool is called, so a
    restart replays it. Without it the answer is only kept with the tool's result, and a
    crash in between makes the restart ask the model again. ``keyed_model``: the model call
    carries an Idempotency-Key, so even a crash between the answer and its journal entry
    gets the same answer back instead of a second model call.
    """

    journal_first = True
    keyed_model = True

    def __init__(self, ctx: Context, journal: dict[str, list[dict[str, Any]]]) -> None:
        self.journal = journal
        mock = httpx.MockTransport(chat_completions)
        self.model = http.instrument(
            openai.OpenAI(base_url=MODEL_URL, api_key="test", max_retries=0), inner=mock
        )
        self.tools = httpx.Client(transport=http.transport(httpx.MockTransport(tools)))

    def step(self, job: str) -> None:
        steps = self.journal.setdefault(job, [])
        while not (steps and steps[-1].get("final")):
            if steps and "result" not in steps[-1]:
                decision = steps[-1]["decision"]  # decided before the crash: replay it
            else:
                decision = self.ask(job, steps)
                if self.journal_first:
                    steps.append({"decision": decision})
            if decision is None:
                steps.append({"decision": None, "final": True})
                return
            result = self.tools.post(
                f"{TOOLS_URL}/{decision['tool']}",
                json=json.loads(decision["arguments"]),
                headers={"Idempotency-Key": f"{job}:{len(steps)}"},
            ).json()
            if self.journal_first:
                steps[-1]["result"] = result["id"]
            else:
                steps.append({"decision": decision, "result": result["id"]})

    def ask(self, job: str, steps: list[dict[str, Any]]) -> dict[str, str] | None:
        messages: list[Any] = [{"role": "user", "content": job}]
        for number, done in enumerate(steps):
            call = {
                "id": f"call_{number}",
                "type": "function",
                "function": {
                    "name": done["decision"]["tool"],
                    "arguments": done["decision"]["arguments"],
                },
            }
            messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": done["result"]})
        key = {"Idempotency-Key": f"{job}:{len(steps)}:model"} if self.keyed_model else {}
        answer = self.model.chat.completions.create(
            model="mock-1", messages=messages, extra_headers=key
        )
        calls = answer.choices[0].message.tool_calls
        if not calls:
            return None
        return {"tool": calls[0].function.name, "arguments": calls[0].function.arguments}

    def state(self) -> dict[str, list[Any]]:
        return {job: [s.get("result") for s in steps] for job, steps in self.journal.items()}


class JournalsButUnkeyed(Provisioner):
    keyed_model = False


class AsksAgain(Provisioner):
    journal_first = False
    keyed_model = False


def factory(agent: type[Provisioner]) -> Any:
    journals: dict[str, dict[str, list[dict[str, Any]]]] = {}
    return lambda ctx: agent(ctx, journals.setdefault(ctx.run_id, {}))


def test_an_agent_that_journals_each_model_answer_before_acting_passes() -> None:
    report = conform(factory(Provisioner), inputs=["web"])

    assert report.passed, str(report)
    assert report.baseline_effects == 5  # model, tool, model, tool, model ("done")


def test_an_unkeyed_model_call_is_asked_again_only_in_the_window_before_its_journal_entry() -> None:
    report = conform(factory(JournalsButUnkeyed), inputs=["web"])

    assert at(report.findings) == expect("duplicate_effect", {"run-1", "run-3", "run-5"})


def test_asking_the_model_again_for_a_decided_step_is_a_duplicate_on_the_model_endpoint() -> None:
    report = conform(factory(AsksAgain), inputs=["web"])

    # Calls: 1 model, 2 tool, 3 model, 4 tool, 5 model. Dying after a model answer, or
    # around the tool call that follows it, loses the answer: the restart asks again.
    asked_again = {"run-1", "run-before-2", "run-2", "run-3", "run-before-4", "run-4", "run-5"}
    assert at(report.findings) == expect("duplicate_effect", asked_again)
    for finding in report.findings:
        assert finding.message.startswith(f"POST {MODEL_URL}/chat/completions({{")
        assert "happened 2 times, once in the baseline" in finding.message
