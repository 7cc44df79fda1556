"""Transient failures are waited out, not counted against the run: the clients retry with
exponential waits and jitter, a run stopped by a resumable error is not claimable before
its backoff has passed (by any claim), and the supervisor gives up only after enough
attempts *and* enough time without progress.

Real PostgreSQL; the clients' sleeps and jitter are injected, and time for the run's
backoff moves through ``cr_now()`` (``clock.advance``), so nothing here sleeps.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from agent_runtime import clients
from agent_runtime.backoff import Backoff
from agent_runtime.clients import CloudClient
from agent_runtime.config import Settings
from agent_runtime.crash import CrashPlan
from agent_runtime.errors import (
    EXIT_RETRY_LATER,
    EXIT_USAGE,
    BackingOff,
    ConfigError,
    ModelError,
    ModelUnavailable,
    RemoteUnavailable,
    WrongEndpoint,
)
from agent_runtime.llm.models import DecideModel
from agent_runtime.loop.worker import Worker
from agent_runtime.store import clock, db
from agent_runtime.store.journal import Journal
from mock_remotes import Cloud, FaultTransport, Model, cloud_transport, model_transport

from .fix_runtime import Agent, journal_rows

LEASE = 12.0  # seconds
SERVER = {"name": "srv-1", "size": "small", "region": "local-1"}
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


# -- the run's backoff: every claim path honours it ------------------------------------------


@pytest.fixture
def remotes(tmp_path: Path) -> Iterator[tuple[Cloud, Model]]:
    with Cloud(tmp_path / "cloud.sqlite3") as cloud:
        yield cloud, Model()


def _worker(
    conn: Any,
    remotes: tuple[Cloud, Model],
    model_faults: int = 0,
    crash: CrashPlan | None = None,
) -> tuple[Worker, FaultTransport]:
    """A worker whose model refuses the next ``model_faults`` connections (two refusals
    make one question fail: ``model_retries=1``)."""
    cloud, model = remotes
    settings = Settings(run_backoff=2.0, run_backoff_cap=30.0, model_retries=1)
    model_side = FaultTransport(model_transport(model)).inject("connect_error", times=model_faults)
    worker = Worker.build(
        Journal(conn),
        settings,
        model_transport=model_side,
        cloud_transport=cloud_transport(cloud),
        sleep=lambda seconds: None,
        rand=lambda: 0.0,  # the longest wait, exactly
        crash=crash,
    )
    return worker, model_side


def _wait(conn: Any, run_id: str) -> float:
    row = conn.execute(
        "SELECT owner, extract(epoch FROM lease_expires_at - cr_now())::float AS wait"
        " FROM runs WHERE id = %s",
        (run_id,),
    ).fetchone()
    assert row["owner"] is None
    return float(row["wait"])


def _supervisor_claims(conn: Any) -> list[str]:
    params = {"owner": "sup:1:s", "lease": LEASE, "limit": 10, "max_attempts": 5, "agents": None}
    return [r["id"] for r in db.run(conn, "claim_expired", params)]


def test_a_run_stopped_by_an_outage_is_claimable_by_nobody_before_its_backoff(
    conn: Any, remotes: tuple[Cloud, Model]
) -> None:
    clock.freeze(conn)  # the waits below are exact
    down, _ = _worker(conn, remotes, model_faults=2)  # both attempts at the question fail
    with pytest.raises(ModelUnavailable):
        down.run("out")
    assert _wait(conn, "out") == pytest.approx(2.0)  # run_backoff, first attempt
    generation = Journal(conn).require_run("out").generation

    assert Journal(conn).claim("out", "cli:1:x", LEASE) is None  # claim_run: CLI, in-process
    assert _supervisor_claims(conn) == []  # claim_expired: the supervisor's sweep
    with pytest.raises(BackingOff, match=r"backing off after 1 attempt\(s\) until .* retry out"):
        _worker(conn, remotes)[0].run("out", create=False)
    assert Journal(conn).require_run("out").generation == generation  # nobody claimed it

    clock.advance(conn, 1.9)
    assert Journal(conn).claim("out", "cli:1:x", LEASE) is None
    clock.advance(conn, 0.2)
    outcome = _worker(conn, remotes)[0].run("out", create=False)
    assert outcome.status == "done" and outcome.steps == 3


def test_each_attempt_without_progress_waits_twice_as_long_up_to_the_cap(
    conn: Any, remotes: tuple[Cloud, Model]
) -> None:
    clock.freeze(conn)
    waits = []
    for attempt in range(6):  # each claim is the worker's own, once the last wait is over
        with pytest.raises(ModelUnavailable):
            _worker(conn, remotes, model_faults=2)[0].run("flaky", create=attempt == 0)
        waits.append(round(_wait(conn, "flaky"), 3))
        clock.advance(conn, waits[-1])
    assert waits == [2.0, 4.0, 8.0, 16.0, 30.0, 30.0]
    assert _supervisor_claims(conn) == ["flaky"]


def test_progress_starts_the_waits_over(conn: Any, remotes: tuple[Cloud, Model]) -> None:
    clock.freeze(conn)
    for attempt in range(3):  # three failed attempts at the first question: waits 2, 4, 8
        with pytest.raises(ModelUnavailable):
            _worker(conn, remotes, model_faults=2)[0].run("p", create=attempt == 0)
        clock.advance(conn, _wait(conn, "p"))
    # The fourth goes through step 0 (a confirm: progress); then the model is down again.
    model_side: list[FaultTransport] = []
    outage = CrashPlan(
        point="after_confirm",
        seq=0,
        action=lambda point, seq: model_side[0].inject("connect_error", times=2) and None,
    )
    worker, transport = _worker(conn, remotes, crash=outage)
    model_side.append(transport)
    with pytest.raises(ModelUnavailable):
        worker.run("p", create=False)
    assert [c["state"] for c in journal_rows(conn, "p")["calls"]] == ["confirmed"]
    assert _wait(conn, "p") == pytest.approx(2.0)  # the first wait again, not the fourth


# -- giving up: attempts and time -----------------------------------------------------------


def _give_up(conn: Any, max_attempts: int, give_up_after: float) -> list[str]:
    params = {"max_attempts": max_attempts, "give_up_after": give_up_after}
    return [r["id"] for r in db.run(conn, "give_up_exhausted", params)]


def _stop_again(journal: Journal, run_id: str, times: int) -> None:
    for _ in range(times):
        lease = journal.claim(run_id, "w:1:x", LEASE)
        assert lease is not None
        assert journal.release(lease, "ModelUnavailable: down", delay=0.0)


def test_a_run_is_given_up_only_after_enough_attempts_and_enough_time(conn: Any) -> None:
    clock.freeze(conn)
    journal = Journal(conn)
    journal.create_run("many-fast")
    _stop_again(journal, "many-fast", 9)  # attempts burnt within an instant
    journal.create_run("few-slow")
    _stop_again(journal, "few-slow", 2)

    assert _give_up(conn, max_attempts=5, give_up_after=60) == []  # attempts, but no time
    clock.advance(conn, 59)
    assert _give_up(conn, max_attempts=5, give_up_after=60) == []
    clock.advance(conn, 1)
    assert _give_up(conn, max_attempts=5, give_up_after=60) == ["many-fast"]
    assert journal.require_run("few-slow").status == "running"  # time, but not the attempts

    failure = journal.require_run("many-fast").failure or ""
    assert failure.startswith("gave up after 9 attempts in 60 s without progress: ModelUnav")


def test_the_give_up_clock_starts_at_the_first_attempt_after_the_last_progress(
    conn: Any,
) -> None:
    clock.freeze(conn)
    journal = Journal(conn)
    journal.create_run("old")
    clock.advance(conn, 3600)  # created an hour ago, claimed only now
    _stop_again(journal, "old", 5)
    assert _give_up(conn, max_attempts=5, give_up_after=600) == []  # an hour old, 0 s trying
    lease = journal.claim("old", "w:1:x", LEASE)
    assert lease is not None
    journal.record_decision(lease, 0, "create_server", dict(SERVER))
    call = journal.record_intent(lease, 0)
    clock.advance(conn, 599)
    journal.record_confirm(lease, call, {"id": "i-1"}, "created")  # progress: attempts 0
    assert journal.release(lease, "ModelUnavailable: down", delay=0.0)
    clock.advance(conn, 10)
    _stop_again(journal, "old", 5)
    clock.advance(conn, 599)
    assert _give_up(conn, max_attempts=5, give_up_after=600) == []
    clock.advance(conn, 1)
    assert _give_up(conn, max_attempts=5, give_up_after=600) == ["old"]


# -- the command line ------------------------------------------------------------------------


@pytest.mark.usefixtures("frozen_clock")
def test_a_run_backing_off_is_refused_by_run_with_when_and_how_then_finishes(
    agent: Agent, conn: Any, mock_servers: Any
) -> None:
    mock_servers.set_model_faults(malformed=1)
    first = agent.run("cli-wait", RUN_BACKOFF="30")  # long enough to still run when asked
    assert first.code == EXIT_RETRY_LATER, first.out
    generation = Journal(conn).require_run("cli-wait").generation

    early = agent.run("cli-wait")

    assert early.code == EXIT_RETRY_LATER, early.out
    (line,) = [ln for ln in early.out.splitlines() if ln.startswith("ERROR")]
    assert line.startswith("ERROR BackingOff error='run cli-wait is backing off after 1 ")
    assert "retry cli-wait" in line
    assert Journal(conn).require_run("cli-wait").generation == generation
    assert mock_servers.calls("cli-wait") == 1

    clock.advance(conn, 30)  # the longest first wait
    late = agent.run("cli-wait")
    assert late.code == 0, late.out
    assert mock_servers.resources("cli-wait")["total"] == 3


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
