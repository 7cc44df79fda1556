"""faults= through the httpx capture: a faulted request is answered as HTTP answers it.

A model call is a request like any other, so the model's 5xx, 429 and garbled answers are
faults too, and an agent that re-asks without a key is caught asking twice.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from crashresume import Context, conform
from crashresume._context import ScenarioLog, running
from crashresume._faults import Fault, make_context

from .subjects import JOBS

httpx = pytest.importorskip("httpx", reason="the http adapter needs the httpx extra")

from crashresume.adapters import http  # noqa: E402

MODEL = "https://model.example/v1/chat/completions"
ANSWER = {"choices": [{"message": {"role": "assistant", "content": "charge it"}}]}


def _remote(sent: list[str]) -> Any:
    def handle(request: Any) -> Any:
        sent.append(request.url.path)
        return httpx.Response(200, json=ANSWER)

    return httpx.MockTransport(handle)


def _post_under(kind: str) -> tuple[Any, list[str], ScenarioLog]:
    sent: list[str] = []
    log = ScenarioLog()
    ctx = make_context(Context, "run-x", log, None, Fault(kind=kind, call=1))
    client = httpx.Client(transport=http.transport(_remote(sent)))
    with running(ctx):
        try:
            return client.post(MODEL, json={"messages": []}), sent, log
        except httpx.ReadTimeout as exc:
            return exc, sent, log


@pytest.mark.parametrize(("kind", "status"), [("fail", 503), ("rate_limited", 429)])
def test_a_failure_before_acting_is_an_error_status_and_nothing_is_sent(
    kind: str, status: int
) -> None:
    response, sent, log = _post_under(kind)

    assert response.status_code == status
    assert sent == [] and log.performed == []
    assert "injected fault" in response.json()["error"]["message"]
    assert response.headers.get("retry-after") == ("0" if kind == "rate_limited" else None)


def test_a_malformed_answer_is_sent_and_its_body_cannot_be_parsed() -> None:
    response, sent, log = _post_under("malformed")

    assert response.status_code == 200
    assert sent == ["/v1/chat/completions"] and len(log.performed) == 1
    with pytest.raises(json.JSONDecodeError):
        response.json()


@pytest.mark.parametrize(("kind", "sent_at_once"), [("lost", 1), ("slow", 0)])
def test_a_lost_or_slow_answer_is_a_read_timeout(kind: str, sent_at_once: int) -> None:
    error, sent, _ = _post_under(kind)

    assert isinstance(error, httpx.ReadTimeout)
    assert len(sent) == sent_at_once


def test_an_async_client_gets_the_same_faults() -> None:
    sent: list[str] = []

    async def handle(request: Any) -> Any:
        sent.append(request.url.path)
        return httpx.Response(200, json=ANSWER)

    ctx = make_context(Context, "run-x", ScenarioLog(), None, Fault(kind="rate_limited", call=1))

    async def post() -> Any:
        transport = http.async_transport(httpx.MockTransport(handle))
        async with httpx.AsyncClient(transport=transport) as client:
            return await client.post(MODEL, json={"messages": []})

    with running(ctx):
        response = asyncio.run(post())
    assert response.status_code == 429 and sent == []


class ModelAgent:
    """Asks the model once per job, retrying what HTTP calls retryable; journals the answer.

    ``keyed``: every ask carries the job as its Idempotency-Key, so a re-ask gets the first
    answer back (an idempotent model gateway, or the runtime's journal, does the same).
    """

    def __init__(self, ctx: Context, journal: dict[str, Any], *, keyed: bool) -> None:
        self.client = httpx.Client(transport=http.transport(_remote([])))
        self.journal = journal
        self.keyed = keyed

    def step(self, job: str) -> None:
        if job in self.journal:
            return
        headers = {"Idempotency-Key": f"ask:{job}"} if self.keyed else {}
        for _ in range(3):
            try:
                response = self.client.post(MODEL, json={"job": job}, headers=headers)
                if response.status_code in (429, 503):
                    continue
                self.journal[job] = response.json()["choices"][0]["message"]["content"]
                return
            except (httpx.TimeoutException, json.JSONDecodeError):
                continue
        raise RuntimeError(f"the model did not answer for {job}")

    def state(self) -> dict[str, Any]:
        return dict(self.journal)


def _model_agent(*, keyed: bool) -> Any:
    journals: dict[str, dict[str, Any]] = {}

    def make_agent(ctx: Context) -> ModelAgent:
        return ModelAgent(ctx, journals.setdefault(ctx.run_id, {}), keyed=keyed)

    return make_agent


FAULTS = ["lost", "fail", "slow", "rate_limited", "malformed"]


def test_a_model_re_asked_without_a_key_after_a_timeout_or_a_garbled_answer_is_caught() -> None:
    report = conform(_model_agent(keyed=False), inputs=JOBS, faults=FAULTS)

    crashes = {"run-1", "run-2", "run-3"}  # a death between answer and journal re-asks too
    assert {(f.scenario, str(f.kind)) for f in report.findings} == {
        (f"run-{kind}-{k}", "retry_duplicated")
        for kind in ("lost", "slow", "malformed")
        for k in (1, 2, 3)
    } | {(scenario, "duplicate_effect") for scenario in crashes}
    finding = next(f for f in report.findings if f.scenario == "run-malformed-2")
    assert f"POST {MODEL}({{'job': 'job-2'}}) happened 2 times, once in the baseline" in (
        finding.message
    )


def test_a_model_asked_under_a_key_passes_every_model_fault() -> None:
    report = conform(_model_agent(keyed=True), inputs=JOBS, faults=FAULTS)

    assert report.passed, str(report)
    assert len(report.scenarios) == 6 + 15
