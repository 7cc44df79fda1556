"""crashresume.adapters.http: an agent's HTTP calls are its effects, without rewriting it."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from crashresume import Context, conform

from .subjects import AFTER, JOBS, at, expect

httpx = pytest.importorskip("httpx", reason="the http adapter needs the httpx extra")
respx = pytest.importorskip("respx", reason="these tests mock remotes with respx")

from crashresume.adapters import http  # noqa: E402

PAY = "https://pay.example"


@pytest.fixture
def remote() -> Iterator[Any]:
    """A payments API that charges once per Idempotency-Key and counts what it was sent."""
    with respx.mock(assert_all_called=False) as mock:
        sent: Counter[str] = Counter()
        first: dict[str, dict[str, Any]] = {}

        def charge(request: Any) -> Any:
            body = json.loads(request.content)
            key = request.headers.get("Idempotency-Key") or f"fresh-{sum(sent.values())}"
            sent[body["job"]] += 1
            first.setdefault(key, {"id": f"ch_{body['job']}", "job": body["job"]})
            return httpx.Response(201, json=first[key])

        mock.post(f"{PAY}/v1/charges").mock(side_effect=charge)
        mock.get(f"{PAY}/v1/balance").respond(200, json={"balance": 0})
        mock.sent = sent  # type: ignore[attr-defined]
        yield mock


class Payer:
    """Reads the balance (not an effect), then charges each job once (an effect)."""

    def __init__(self, ctx: Context, done: dict[str, str], client: Any, *, keyed: bool) -> None:
        self.ctx, self.done, self.client, self.keyed = ctx, done, client, keyed

    def step(self, job: str) -> None:
        if job in self.done:
            return
        self.client.get(f"{PAY}/v1/balance").raise_for_status()
        headers = {"Idempotency-Key": f"charge:{job}"} if self.keyed else {}
        answer = self.client.post(f"{PAY}/v1/charges", json={"job": job}, headers=headers)
        answer.raise_for_status()
        self.done[job] = answer.json()["id"]

    def state(self) -> dict[str, str]:
        return dict(self.done)


def payers(client_for: Any, *, keyed: bool) -> Any:
    stores: dict[str, dict[str, str]] = {}

    def make_agent(ctx: Context) -> Payer:
        return Payer(ctx, stores.setdefault(ctx.run_id, {}), client_for(), keyed=keyed)

    return make_agent


def new_client() -> Any:
    return httpx.Client(transport=http.transport(httpx.HTTPTransport()))


def test_a_keyed_post_passes_and_an_unkeyed_one_is_a_duplicate_named_by_method_and_url(
    remote: Any,
) -> None:
    good = conform(payers(new_client, keyed=True), inputs=JOBS)
    bad = conform(payers(new_client, keyed=False), inputs=JOBS)

    assert good.passed, str(good)
    assert good.baseline_effects == 3  # the three POSTs; the GETs are not effects
    assert at(bad.findings) == expect("duplicate_effect", AFTER)
    by_scenario = {finding.scenario: finding for finding in bad.findings}
    assert by_scenario["run-2"].message == (
        "POST https://pay.example/v1/charges({'job': 'job-2'}) happened 2 times, once in the "
        "baseline"
    )


def test_a_known_key_gets_the_stored_first_response_and_nothing_is_sent_again(
    remote: Any,
) -> None:
    receipts: list[str] = []

    class Recording(Payer):
        def state(self) -> dict[str, str]:
            receipts[:] = list(self.done.values())
            return super().state()

    stores: dict[str, dict[str, str]] = {}
    report = conform(
        lambda ctx: Recording(ctx, stores.setdefault(ctx.run_id, {}), new_client(), keyed=True),
        inputs=JOBS,
        only="run-2",
    )

    assert report.passed, str(report)
    # Two baselines send every job; run-2 sends job-1 and job-2, dies, and its resume sends
    # job-3 only: job-2's key was answered from the harness's record.
    assert remote.sent == {"job-1": 3, "job-2": 3, "job-3": 3}
    assert receipts == ["ch_job-1", "ch_job-2", "ch_job-3"]


def test_the_async_transport_records_the_same_effects(remote: Any) -> None:
    class AsyncPayer(Payer):
        def step(self, job: str) -> None:
            asyncio.run(self.async_step(job))

        async def async_step(self, job: str) -> None:
            if job in self.done:
                return
            async with httpx.AsyncClient(transport=http.async_transport()) as client:
                headers = {"Idempotency-Key": f"charge:{job}"} if self.keyed else {}
                answer = await client.post(f"{PAY}/v1/charges", json={"job": job}, headers=headers)
                self.done[job] = answer.json()["id"]

    def factory(*, keyed: bool) -> Any:
        stores: dict[str, dict[str, str]] = {}
        return lambda ctx: AsyncPayer(ctx, stores.setdefault(ctx.run_id, {}), None, keyed=keyed)

    assert conform(factory(keyed=True), inputs=JOBS).passed
    bad = conform(factory(keyed=False), inputs=JOBS)
    assert at(bad.findings) == expect("duplicate_effect", AFTER)


def test_instrument_wraps_an_existing_client_and_its_mounts(remote: Any) -> None:
    def existing() -> Any:
        client = httpx.Client(mounts={PAY: httpx.HTTPTransport()})
        assert http.instrument(http.instrument(client)) is client  # twice is a no-op
        return client

    bad = conform(payers(existing, keyed=False), inputs=JOBS)
    assert at(bad.findings) == expect("duplicate_effect", AFTER)


def test_patched_routes_clients_made_with_default_transports_and_only_while_active(
    remote: Any,
) -> None:
    unrouted = conform(payers(httpx.Client, keyed=False), inputs=JOBS)
    with http.patched():
        routed = conform(payers(httpx.Client, keyed=False), inputs=JOBS)
    assert unrouted.baseline_effects == 0  # nothing the harness could see
    assert at(routed.findings) == expect("duplicate_effect", AFTER)

    stores: dict[str, dict[str, str]] = {}

    @contextlib.contextmanager
    def make_agent(ctx: Context) -> Iterator[Payer]:
        with http.patched():  # for exactly the duration of each start
            yield Payer(ctx, stores.setdefault(ctx.run_id, {}), httpx.Client(), keyed=False)

    assert at(conform(make_agent, inputs=JOBS).findings) == expect("duplicate_effect", AFTER)
    assert httpx.HTTPTransport.handle_request.__qualname__ == "HTTPTransport.handle_request"


def test_the_records_cross_into_process_mode(remote: Any) -> None:
    bad = conform(payers(new_client, keyed=False), inputs=JOBS, mode="process")
    assert at(bad.findings) >= expect("duplicate_effect", AFTER)
    assert {str(kind) for kind in bad.kinds()} <= {"duplicate_effect", "state_lost"}


def test_outside_conform_requests_just_go_out(remote: Any) -> None:
    client = new_client()
    assert client.post(f"{PAY}/v1/charges", json={"job": "x"}).json()["id"] == "ch_x"
    assert remote.sent == {"x": 1}


def test_describe_parses_json_keeps_text_and_bytes() -> None:
    def request(content: bytes, kind: str) -> Any:
        return httpx.Request("PUT", f"{PAY}/x", content=content, headers={"content-type": kind})

    assert http.describe(request(b'{"b": 1}', "application/json")) == (
        f"PUT {PAY}/x",
        {"b": 1},
        None,
    )
    assert http.describe(request(b"plain", "text/plain"))[1] == "plain"
    assert http.describe(request(b"\xff\xfe", "application/octet-stream"))[1] == b"\xff\xfe"
    assert http.describe(request(b"", "text/plain"))[1] is None


def test_instrument_refuses_what_is_not_an_http_client() -> None:
    from crashresume import UsageError

    with pytest.raises(UsageError, match="takes an httpx or httpx2 client"):
        http.instrument(object())
