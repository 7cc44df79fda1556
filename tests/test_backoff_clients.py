"""The clients wait out transient failures: exponential waits with jitter, and what they
never retry.

The rule itself (`Backoff`: doubling up to a cap, jitter only shortening), the model
client asking again after connect errors, 5xx and timeouts, and the cloud client sending
again under the same key; a wrong endpoint (404, 405) or an answer it cannot read is
never sent again. The clients' sleeps and jitter are injected: nothing here sleeps. How a
run stopped by such a failure waits, and is given up, is test_backoff_runs.py.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from agent_runtime import clients
from agent_runtime.backoff import Backoff
from agent_runtime.clients import CloudClient
from agent_runtime.config import Settings
from agent_runtime.errors import (
    EXIT_RETRY_LATER,
    EXIT_USAGE,
    ConfigError,
    ModelError,
    ModelUnavailable,
    RemoteUnavailable,
    WrongEndpoint,
)
from agent_runtime.llm.models import DecideModel
from mock_remotes import FaultTransport, Model, model_transport

from .fix_runtime import SERVER

DECISION = {"tool": "create_server", "args": SERVER}


# -- the rule --------------------------------------------------------------------------------


def test_waits_double_up_to_the_cap_and_jitter_only_shortens_them() -> None:
    longest = Backoff(base=1.0, cap=10.0, rand=lambda: 0.0)
    shortest = Backoff(base=1.0, cap=10.0, rand=lambda: 0.999999)
    assert [longest.delay(n) for n in range(1, 7)] == [1.0, 2.0, 4.0, 8.0, 10.0, 10.0]
    assert [round(shortest.delay(n), 3) for n in range(1, 6)] == [0.5, 1.0, 2.0, 4.0, 5.0]
    # While they grow, never shorter than the one before, however the jitter falls.
    for n in range(1, 4):
        assert shortest.delay(n + 1) >= longest.delay(n)
    # At the cap the jitter still spreads them: between half the cap and the cap.
    assert 5.0 <= shortest.delay(10_000) < longest.delay(10_000) == 10.0  # and no overflow


def test_a_backoff_of_nonsense_is_refused() -> None:
    with pytest.raises(ConfigError, match="backoff base must be >= 0"):
        Backoff(base=-1.0, cap=1.0)
    with pytest.raises(ConfigError, match=r"run_backoff_cap .* must be at least run_backoff"):
        Settings(run_backoff=10.0, run_backoff_cap=1.0)


def test_by_default_a_run_is_not_given_up_within_a_minute() -> None:
    settings = Settings()
    assert settings.give_up_after >= 60
    assert settings.model_retries >= 1 and settings.run_backoff > 0


# -- the model client ------------------------------------------------------------------------


def _model(transport: httpx.BaseTransport, sleeps: list[float], retries: int = 3) -> DecideModel:
    return DecideModel(
        "http://model",
        timeout=5.0,
        retries=retries,
        backoff=0.2,
        transport=transport,
        sleep=sleeps.append,
        rand=lambda: 0.0,
    )


class Script(httpx.MockTransport):
    """Answers requests in order from a list: a response, or a transport error to raise."""

    def __init__(self, *replies: httpx.Response | type[httpx.TransportError]) -> None:
        self.replies = list(replies)
        self.seen: list[httpx.Request] = []
        super().__init__(self._answer)

    def _answer(self, request: httpx.Request) -> httpx.Response:
        self.seen.append(request)
        reply = self.replies.pop(0)
        if isinstance(reply, httpx.Response):
            return reply
        raise reply("injected", request=request)


def test_the_model_client_asks_again_after_connect_errors_5xx_and_timeouts() -> None:
    sleeps: list[float] = []
    transport = Script(
        httpx.ConnectError,
        httpx.Response(503, json={"error": "overloaded"}),
        httpx.ReadTimeout,
        httpx.Response(200, json=DECISION),
    )
    client = _model(transport, sleeps)

    assert client.decide("r", []) == DECISION

    assert len(transport.seen) == 4
    assert sleeps == [0.2, 0.4, 0.8]  # exponential, and the injected jitter took nothing off


def test_the_model_client_gives_up_after_its_retries_with_a_resumable_error() -> None:
    sleeps: list[float] = []
    transport = FaultTransport(model_transport(Model())).inject("connect_error", times=3)
    client = _model(transport, sleeps, retries=2)

    with pytest.raises(ModelUnavailable, match=r"after 3 attempt\(s\).*ConnectError") as info:
        client.decide("r", [])

    assert not info.value.permanent and info.value.exit_code == EXIT_RETRY_LATER
    assert sleeps == [0.2, 0.4]
    answer = client.decide("r", [])  # the outage is over: the same client goes on
    assert isinstance(answer, dict) and answer["tool"] == "create_server"


@pytest.mark.parametrize("status", [404, 405])
def test_a_404_or_405_from_the_model_is_a_wrong_endpoint_and_never_retried(status: int) -> None:
    sleeps: list[float] = []
    transport = Script(httpx.Response(status, json={"error": "not_found"}))
    client = _model(transport, sleeps)

    with pytest.raises(WrongEndpoint, match="MODEL_URL does not point at the model") as info:
        client.decide("r", [])

    assert len(transport.seen) == 1 and sleeps == []
    assert info.value.exit_code == EXIT_USAGE and not info.value.permanent


def test_another_4xx_from_the_model_is_not_retried() -> None:
    sleeps: list[float] = []
    transport = Script(httpx.Response(400, json={"error": "invalid_request"}))
    with pytest.raises(ModelError, match="HTTP 400 invalid_request"):
        _model(transport, sleeps).decide("r", [])
    assert sleeps == []


# -- the cloud client ------------------------------------------------------------------------


@pytest.mark.parametrize("status", [404, 405])
def test_a_404_or_405_from_the_cloud_is_a_wrong_endpoint_and_never_retried(status: int) -> None:
    sleeps: list[float] = []
    transport = Script(httpx.Response(status, json={"error": "not_found"}))
    client = CloudClient(
        "http://cloud", timeout=5.0, retries=3, backoff=0.2, transport=transport,
        sleep=sleeps.append,
    )  # fmt: skip

    with pytest.raises(WrongEndpoint, match="CLOUD_URL does not point at the cloud") as info:
        client.call("/v1/servers", SERVER, key="r:0", generation=1)

    assert len(transport.seen) == 1 and sleeps == []
    assert not info.value.permanent


@pytest.mark.parametrize(
    ("reply", "said"),
    [
        (
            {"content": b"not gzip at all", "headers": {"content-encoding": "gzip"}},
            "cannot be decoded as its Content-Encoding says",
        ),
        ({"content": b"<html>oops"}, "is not JSON"),
        ({"json": {"status": "made", "id": "i-1"}}, "is malformed"),
    ],
    ids=["lying encoding", "not JSON", "unknown status"],
)
def test_an_answer_the_cloud_client_cannot_read_is_unavailable_and_keeps_the_intent(
    reply: dict[str, Any], said: str
) -> None:
    seen: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request)  # made now, as a server's bytes are read: a lying encoding fails
        return httpx.Response(201, **reply)

    transport = httpx.MockTransport(answer)
    client = CloudClient("http://cloud", timeout=5.0, retries=3, backoff=0.2, transport=transport)

    with pytest.raises(RemoteUnavailable, match=said) as info:
        client.call("/v1/servers", SERVER, key="r:0", generation=1)

    assert "key=r:0" in str(info.value) and len(seen) == 1  # it answered: no re-send now
    assert info.value.exit_code == EXIT_RETRY_LATER  # a clean exit, re-sent on restart


@pytest.mark.parametrize("status", [408, 429])
def test_a_408_or_429_from_the_cloud_is_sent_again_under_the_same_key(status: int) -> None:
    sleeps: list[float] = []
    created = httpx.Response(201, json={"status": "created", "id": "i-1"})
    transport = Script(httpx.Response(status, json={"error": "slow_down"}), created)
    client = CloudClient(
        "http://cloud", timeout=5.0, retries=3, backoff=0.2, transport=transport,
        sleep=sleeps.append,
    )  # fmt: skip

    answer = client.call("/v1/servers", SERVER, key="r:0", generation=1)

    assert answer.remote_status == "created" and len(sleeps) == 1
    assert [r.headers["Idempotency-Key"] for r in transport.seen] == ["r:0", "r:0"]


def test_the_cloud_clients_waits_carry_jitter() -> None:
    sleeps: list[float] = []
    created = httpx.Response(201, json={"status": "created", "id": "i-1"})
    transport = Script(*[httpx.Response(500, json={"error": "boom"}) for _ in range(3)], created)
    client = CloudClient(
        "http://cloud", timeout=5.0, retries=3, backoff=0.2, transport=transport,
        sleep=sleeps.append, rand=lambda: 1.0,
    )  # fmt: skip
    answer = client.call("/v1/servers", SERVER, key="r:0", generation=1)
    assert answer.remote_status == "created"
    assert sleeps == pytest.approx([0.1, 0.2, 0.4])  # each wait halved by the most jitter


# -- where the clients post ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("base", "asked"),
    [
        ("http://model", "http://model/v1/decide"),
        ("http://model/v1", "http://model/v1/decide"),
        ("http://model/v1/", "http://model/v1/decide"),
        ("http://model/proxy", "http://model/proxy/v1/decide"),
    ],
)
def test_the_decide_client_takes_the_servers_root_or_its_v1_base(base: str, asked: str) -> None:
    transport = Script(httpx.Response(200, json=DECISION))
    model = DecideModel(base, timeout=5.0, retries=0, transport=transport, sleep=lambda s: None)
    model.decide("r1", [])
    assert [str(r.url) for r in transport.seen] == [asked]


def test_a_client_posts_where_httpx_would_join_its_base_and_path() -> None:
    """The joined URL is made once per path (URLS_KEPT of them), and is the URL httpx
    makes of the base and the path itself: the base's own path stays in front."""
    seen: list[str] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(str(request.url))
        return httpx.Response(201, json={"status": "created", "id": "s-1"})

    client = CloudClient(
        "http://cloud.test/api", timeout=1.0, transport=httpx.MockTransport(answer)
    )
    for seq in range(2):
        client.call("/v1/servers", {"name": "a"}, key=f"r:{seq}", generation=1)
    assert seen == ["http://cloud.test/api/v1/servers"] * 2
    assert client.url("/v1/servers") is client.url("/v1/servers")
    assert str(client.url("v1/dns?x=1")) == "http://cloud.test/api/v1/dns?x=1"
    for n in range(clients.URLS_KEPT + 5):
        client.url(f"/v1/servers/{n}")
    assert str(client.url("/v1/servers/999")) == "http://cloud.test/api/v1/servers/999"
    assert len(client._urls) == clients.URLS_KEPT
    client.close()
