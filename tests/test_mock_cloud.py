"""The mock cloud: idempotency, fencing, durability, knobs, and both ways to reach it."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
import respx

import mock_remotes
from mock_remotes import Cloud, FaultTransport, MockServers, cloud_transport, start_mocks
from mock_remotes.cloud import create_app
from mock_remotes.errors import InjectedFailure, StaleGeneration
from mock_remotes.serve import MockStartError

SERVER = {"name": "web", "size": "small", "region": "local-1"}
DATABASE = {"name": "main", "engine": "postgres", "server_id": "i-0000001"}
DNS = {"name": "app.example.test", "type": "A", "value": "10.0.0.1"}


def create(
    client: httpx.Client,
    key: str | None = "run:0",
    args: object = SERVER,
    *,
    path: str = "/v1/servers",
    generation: int | None = None,
    timeout: float = 5.0,
) -> httpx.Response:
    headers = {} if key is None else {"Idempotency-Key": key}
    if generation is not None:
        headers["X-Fencing-Generation"] = str(generation)
    return client.post(path, json=args, headers=headers, timeout=timeout)


# -- idempotency ---------------------------------------------------------------------------


def test_first_request_under_a_key_creates_the_resource(cloud_http: httpx.Client) -> None:
    response = create(cloud_http)

    assert response.status_code == 201
    assert response.json() == {
        "id": "i-0000001",
        "kind": "server",
        "status": "created",
        **SERVER,
        "ip": "10.0.0.1",
    }
    assert cloud_http.get("/v1/resources").json()["counts"] == {
        "servers": 1,
        "databases": 0,
        "dns_records": 0,
    }


def test_repeated_key_returns_the_first_result_as_already_done(
    cloud_http: httpx.Client, cloud: Cloud
) -> None:
    first = create(cloud_http)
    again = create(cloud_http)

    assert again.status_code == 200
    assert again.json() == {**first.json(), "status": "already_done"}
    assert cloud.counts()["servers"] == 1
    assert cloud.requests("run:0") == 2


def test_each_kind_counts_its_own_ids_and_servers_get_distinct_ips(
    cloud_http: httpx.Client,
) -> None:
    servers = [create(cloud_http, f"run:{seq}").json() for seq in range(3)]
    database = create(cloud_http, "run:3", DATABASE, path="/v1/databases").json()
    record = create(cloud_http, "run:4", DNS, path="/v1/dns_records").json()

    assert [s["id"] for s in servers] == ["i-0000001", "i-0000002", "i-0000003"]
    assert len({s["ip"] for s in servers}) == 3
    assert (database["id"], database["kind"]) == ("db-0000001", "database")
    assert (record["id"], record["kind"]) == ("dns-0000001", "dns_record")


def test_repeated_key_with_different_args_is_a_key_conflict(
    cloud_http: httpx.Client, cloud: Cloud
) -> None:
    create(cloud_http)
    response = create(cloud_http, args={**SERVER, "size": "large"})

    assert response.status_code == 409
    assert response.json()["error"] == "key_conflict"
    assert cloud.counts()["servers"] == 1


def test_repeated_key_for_another_kind_is_a_key_conflict(
    cloud_http: httpx.Client, cloud: Cloud
) -> None:
    create(cloud_http)
    response = create(cloud_http, args=DATABASE, path="/v1/databases")

    assert response.status_code == 409
    assert response.json()["error"] == "key_conflict"
    assert cloud.counts() == {"servers": 1, "databases": 0, "dns_records": 0}


def test_concurrent_requests_under_one_key_create_exactly_one_resource(
    cloud: Cloud,
) -> None:
    statuses: list[int] = []

    def send() -> None:
        with httpx.Client(transport=cloud_transport(cloud), base_url="http://cloud") as client:
            statuses.append(create(client).status_code)

    threads = [threading.Thread(target=send) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert sorted(statuses) == [200] * 7 + [201]
    assert cloud.counts()["servers"] == 1
    assert cloud.requests("run:0") == 8


# -- refusals --------------------------------------------------------------------------------


@pytest.mark.parametrize("headers", [{}, {"Idempotency-Key": ""}, {"Idempotency-Key": "  "}])
def test_missing_idempotency_key_is_refused_with_400(
    cloud_http: httpx.Client, cloud: Cloud, headers: dict[str, str]
) -> None:
    response = cloud_http.post("/v1/servers", json=SERVER, headers=headers)

    assert response.status_code == 400
    assert response.json()["error"] == "missing_idempotency_key"
    assert response.json()["detail"]
    assert cloud.counts()["servers"] == 0


@pytest.mark.parametrize(
    ("path", "args"),
    [
        ("/v1/servers", {**SERVER, "size": "gigantic"}),
        ("/v1/servers", {"name": "web", "size": "small"}),
        ("/v1/servers", {**SERVER, "owner": "me"}),
        ("/v1/servers", {**SERVER, "name": 7}),
        ("/v1/servers", {**SERVER, "name": ""}),
        ("/v1/servers", ["web", "small", "local-1"]),
        ("/v1/databases", {**DATABASE, "engine": "oracle"}),
        ("/v1/dns_records", {**DNS, "type": "MX"}),
    ],
)
def test_invalid_args_are_refused_with_422_and_nothing_is_created(
    cloud_http: httpx.Client, cloud: Cloud, path: str, args: object
) -> None:
    response = create(cloud_http, args=args, path=path)

    assert response.status_code == 422
    assert response.json()["error"] == "invalid_args"
    assert response.json()["detail"]
    assert cloud.resources()["total"] == 0


def test_a_body_that_is_not_json_is_refused_with_422(cloud_http: httpx.Client) -> None:
    response = cloud_http.post("/v1/servers", content=b"{size", headers={"Idempotency-Key": "r:0"})

    assert response.status_code == 422
    assert response.json()["error"] == "invalid_args"


def test_a_fencing_generation_that_is_not_a_number_is_refused(
    cloud_http: httpx.Client,
) -> None:
    response = cloud_http.post(
        "/v1/servers",
        json=SERVER,
        headers={"Idempotency-Key": "run:0", "X-Fencing-Generation": "two"},
    )

    assert response.status_code == 400
    assert response.json()["error"] == "invalid_fencing_generation"


def test_unknown_route_is_404_and_wrong_method_is_405(cloud_http: httpx.Client) -> None:
    assert cloud_http.get("/v1/volumes").status_code == 404
    assert cloud_http.get("/v1/servers").status_code == 405


# -- fencing -----------------------------------------------------------------------------------


def test_stale_generation_is_refused_without_acting(cloud_http: httpx.Client, cloud: Cloud) -> None:
    create(cloud_http, "run:0", generation=2)
    response = create(cloud_http, "run:1", generation=1)

    assert response.status_code == 409
    assert response.json()["error"] == "stale_generation"
    assert cloud.record("run:1") is None
    assert cloud.counts()["servers"] == 1
    assert cloud.generation("run") == 2


def test_stale_generation_is_checked_before_the_key_is_looked_up(
    cloud_http: httpx.Client,
) -> None:
    create(cloud_http, "run:0", generation=1)
    create(cloud_http, "run:1", generation=2)

    response = create(cloud_http, "run:0", generation=1)

    assert response.status_code == 409
    assert response.json()["error"] == "stale_generation"


def test_equal_or_higher_generation_is_served_and_raises_the_fence(
    cloud_http: httpx.Client, cloud: Cloud
) -> None:
    assert create(cloud_http, "run:0", generation=3).status_code == 201
    assert create(cloud_http, "run:0", generation=3).status_code == 200
    assert create(cloud_http, "run:1", generation=5).status_code == 201

    record = cloud.record("run:1")
    assert cloud.generation("run") == 5
    assert record is not None
    assert record.generation == 5


def test_fencing_is_per_run(cloud_http: httpx.Client) -> None:
    create(cloud_http, "run-a:0", generation=9)

    assert create(cloud_http, "run-b:0", generation=1).status_code == 201


def test_requests_without_a_generation_are_not_fenced(cloud_http: httpx.Client) -> None:
    create(cloud_http, "run:0", generation=9)

    assert create(cloud_http, "run:1").status_code == 201


# -- durability ----------------------------------------------------------------------------------


def test_a_new_cloud_on_the_same_file_remembers_keys_counters_and_generations(
    tmp_path: Path,
) -> None:
    store = tmp_path / "cloud.sqlite3"
    with Cloud(store) as before, httpx.Client(transport=cloud_transport(before)) as client:
        first = create(client, "run:0", generation=4, path="http://cloud/v1/servers").json()

    with Cloud(store) as after, httpx.Client(transport=cloud_transport(after)) as client:
        again = create(client, "run:0", generation=4, path="http://cloud/v1/servers")
        stale = create(client, "run:1", generation=3, path="http://cloud/v1/servers")
        fresh = create(client, "run:1", generation=4, path="http://cloud/v1/servers")

        assert again.status_code == 200
        assert again.json() == {**first, "status": "already_done"}
        assert stale.json()["error"] == "stale_generation"
        assert fresh.json()["id"] == "i-0000002"
        assert after.requests("run:0") == 2


# -- knobs ---------------------------------------------------------------------------------------


def test_fail_before_answers_500_without_acting_then_succeeds(
    cloud_http: httpx.Client, cloud: Cloud
) -> None:
    cloud_http.post("/admin/faults", json={"fail_before": 2})

    failures = [create(cloud_http) for _ in range(2)]
    success = create(cloud_http)

    assert [r.status_code for r in failures] == [500, 500]
    assert failures[0].json()["error"] == "injected_failure"
    assert success.status_code == 201
    assert success.json()["id"] == "i-0000001"
    assert cloud.requests("run:0") == 3


def test_drop_after_acts_then_times_out_and_the_resend_is_already_done(
    cloud_http: httpx.Client, cloud: Cloud
) -> None:
    cloud_http.post("/admin/faults", json={"drop_after": 1})

    with pytest.raises(httpx.ReadTimeout):
        create(cloud_http)
    assert cloud.counts()["servers"] == 1

    resend = create(cloud_http)
    assert resend.status_code == 200
    assert resend.json()["status"] == "already_done"
    assert resend.json()["id"] == "i-0000001"
    assert cloud.counts()["servers"] == 1


def test_drop_after_spares_refused_requests(cloud_http: httpx.Client) -> None:
    cloud_http.post("/admin/faults", json={"drop_after": 1})

    assert create(cloud_http, args={}).status_code == 422
    with pytest.raises(httpx.ReadTimeout):
        create(cloud_http)


def test_latency_beyond_the_read_timeout_acts_then_times_out_without_sleeping(
    cloud_http: httpx.Client, cloud: Cloud
) -> None:
    cloud.set_faults(latency=60.0)
    started = time.monotonic()

    with pytest.raises(httpx.ReadTimeout):
        create(cloud_http, timeout=1.0)

    assert time.monotonic() - started < 1.0
    assert cloud.counts()["servers"] == 1


def test_latency_within_the_read_timeout_delays_the_answer(
    cloud_http: httpx.Client, cloud: Cloud
) -> None:
    cloud.set_faults(latency=0.02)
    started = time.monotonic()

    assert create(cloud_http).status_code == 201
    assert time.monotonic() - started >= 0.02


def test_a_later_faults_call_replaces_only_the_fields_it_names(
    cloud_http: httpx.Client,
) -> None:
    cloud_http.post("/admin/faults", json={"fail_before": 2, "latency": 0.5})
    shown = cloud_http.post("/admin/faults", json={"drop_after": 1}).json()

    assert shown == {
        "fail_before": 2,
        "drop_after": 1,
        "latency": 0.5,
        "hang": 30.0,
        "hold_next": 0,
    }
    assert cloud_http.get("/admin/faults").json() == shown


@pytest.mark.parametrize("knobs", [{"explode": 1}, {"fail_before": -1}, {"latency": "slow"}])
def test_bad_fault_knobs_are_refused_with_422(
    cloud_http: httpx.Client, knobs: dict[str, Any]
) -> None:
    assert cloud_http.post("/admin/faults", json=knobs).status_code == 422


def test_reset_forgets_everything(cloud_http: httpx.Client, cloud: Cloud) -> None:
    create(cloud_http, "run:0", generation=7)
    cloud_http.post("/admin/faults", json={"fail_before": 3})

    assert cloud_http.post("/admin/reset").status_code == 200

    assert cloud.resources()["total"] == 0
    assert cloud.requests("run:0") == 0
    assert cloud.generation("run") is None
    assert cloud.faults.fail_before == 0
    assert create(cloud_http, "run:0", generation=1).json()["id"] == "i-0000001"


def test_reset_restores_the_latency_the_cloud_was_started_with(tmp_path: Path) -> None:
    with Cloud(tmp_path / "c.sqlite3", latency=0.25) as cloud:
        cloud.set_faults(latency=0.0)
        cloud.reset()

        assert cloud.faults.latency == 0.25


# -- reads ---------------------------------------------------------------------------------------


def test_resources_can_be_filtered_by_run(cloud_http: httpx.Client) -> None:
    create(cloud_http, "run-a:0")
    create(cloud_http, "run-a:1", DATABASE, path="/v1/databases")
    create(cloud_http, "run-b:0")

    body = cloud_http.get("/v1/resources", params={"run": "run-a"}).json()

    assert body["counts"] == {"servers": 1, "databases": 1, "dns_records": 0}
    assert body["total"] == 2
    assert [r["key"] for r in body["resources"]] == ["run-a:0", "run-a:1"]
    first = body["resources"][0]
    assert set(first) == {"key", "kind", "id", "args", "result", "generation", "created_at"}
    assert first["args"] == SERVER
    assert first["result"]["status"] == "created"


def test_key_lookup_shows_the_record_and_how_many_requests_carried_it(
    cloud_http: httpx.Client,
) -> None:
    create(cloud_http, "run:0", generation=1)
    create(cloud_http, "run:0", generation=1)

    body = cloud_http.get("/v1/keys/run:0").json()

    assert body["id"] == "i-0000001"
    assert body["generation"] == 1
    assert body["requests"] == 2


def test_unknown_key_is_404_but_still_shows_refused_requests(
    cloud_http: httpx.Client,
) -> None:
    cloud_http.post("/admin/faults", json={"fail_before": 1})
    create(cloud_http, "run:5")

    response = cloud_http.get("/v1/keys/run:5")

    assert response.status_code == 404
    assert response.json()["error"] == "unknown_key"
    assert response.json()["requests"] == 1


# -- transport-level faults ----------------------------------------------------------------------


def test_fault_transport_connect_error_never_reaches_the_cloud(cloud: Cloud) -> None:
    transport = FaultTransport(cloud_transport(cloud)).inject("connect_error")
    with httpx.Client(transport=transport, base_url="http://cloud") as client:
        with pytest.raises(httpx.ConnectError):
            create(client)
        assert create(client).status_code == 201

    assert cloud.requests("run:0") == 1


def test_fault_transport_read_timeout_lets_the_cloud_act_and_loses_the_answer(
    cloud: Cloud,
) -> None:
    transport = FaultTransport(cloud_transport(cloud))
    transport.inject("read_timeout", path="/v1/servers")
    with httpx.Client(transport=transport, base_url="http://cloud") as client:
        assert client.get("/v1/resources").status_code == 200
        with pytest.raises(httpx.ReadTimeout):
            create(client)
        assert create(client).json()["status"] == "already_done"

    assert transport.pending == 0
    assert transport.injected == [("read_timeout", "POST /v1/servers")]


def test_respx_can_time_out_a_read_after_the_in_process_cloud_acted(cloud: Cloud) -> None:
    remote = cloud_transport(cloud)

    def act_then_lose_the_answer(request: httpx.Request) -> httpx.Response:
        remote.handle_request(request)
        raise httpx.ReadTimeout("answer lost on the way back", request=request)

    with respx.mock(base_url="http://cloud", assert_all_called=True) as router:
        router.post("/v1/servers").mock(side_effect=act_then_lose_the_answer)
        with httpx.Client(base_url="http://cloud") as client, pytest.raises(httpx.ReadTimeout):
            create(client)

    assert cloud.counts()["servers"] == 1
    with httpx.Client(transport=remote, base_url="http://cloud") as client:
        assert create(client).json()["status"] == "already_done"


# -- the FastAPI app, uvicorn, and the package ---------------------------------------------------


def test_the_fastapi_app_answers_the_same_bytes_as_the_in_process_transport(
    tmp_path: Path,
) -> None:
    requests = [("run:0", SERVER), ("run:0", SERVER), ("run:0", {**SERVER, "size": "large"})]

    def through_transport() -> list[tuple[int, bytes]]:
        with Cloud(tmp_path / "a.sqlite3") as cloud:
            client = httpx.Client(transport=cloud_transport(cloud), base_url="http://cloud")
            with client:
                return [
                    (r.status_code, r.content) for r in (create(client, k, a) for k, a in requests)
                ]

    async def through_app() -> list[tuple[int, bytes]]:
        with Cloud(tmp_path / "b.sqlite3") as cloud:
            transport = httpx.ASGITransport(app=create_app(cloud))
            async with httpx.AsyncClient(transport=transport, base_url="http://cloud") as client:
                answers = []
                for key, args in requests:
                    headers = {"Idempotency-Key": key}
                    response = await client.post("/v1/servers", json=args, headers=headers)
                    answers.append((response.status_code, response.content))
                return answers

    assert through_transport() == asyncio.run(through_app())


def test_uvicorn_cloud_drops_an_answer_after_acting_and_the_resend_is_already_done(
    mock_servers: MockServers,
) -> None:
    mock_servers.reset()
    mock_servers.set_cloud_faults(drop_after=1)

    with httpx.Client(base_url=mock_servers.cloud_url) as client:
        with pytest.raises(httpx.ReadTimeout):
            create(client, "uv:0", timeout=0.5)
        assert mock_servers.resources("uv")["counts"]["servers"] == 1
        resend = create(client, "uv:0")

    assert resend.status_code == 200
    assert resend.json()["status"] == "already_done"
    assert mock_servers.resources()["total"] == 1


def test_restarted_mocks_on_the_same_data_dir_remember_keys_and_call_counts(
    tmp_path: Path,
) -> None:
    with start_mocks(tmp_path) as first:
        with httpx.Client(base_url=first.cloud_url) as client:
            created = create(client, "keep:0").json()
        with httpx.Client(base_url=first.model_url) as client:
            client.post("/v1/decide", json={"run_id": "keep", "history": []})

    with start_mocks(tmp_path) as second:
        with httpx.Client(base_url=second.cloud_url) as client:
            again = create(client, "keep:0")
        assert second.calls("keep") == 1

    assert again.json() == {**created, "status": "already_done"}


def _listening_socket() -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    return sock


def test_start_mocks_leaves_nothing_running_when_one_mock_cannot_start(
    tmp_path: Path,
) -> None:
    with _listening_socket() as taken, _listening_socket() as spare:
        model_port = taken.getsockname()[1]
        cloud_port = spare.getsockname()[1]
        spare.close()  # free for the cloud, which must be stopped again

        with pytest.raises(MockStartError, match="mock model exited"):
            start_mocks(tmp_path, cloud_port=cloud_port, model_port=model_port)

    with pytest.raises(httpx.ConnectError):
        httpx.get(f"http://127.0.0.1:{cloud_port}/healthz", timeout=1.0)


def test_the_package_exports_exactly_its_sorted_public_names() -> None:
    exported = mock_remotes.__all__

    assert exported == sorted(exported)
    assert all(hasattr(mock_remotes, name) for name in exported)


def test_every_answer_is_logged_with_its_generation_and_whether_it_was_dropped(
    cloud: Cloud,
) -> None:
    args = {"name": "srv-1", "size": "small", "region": "local-1"}
    cloud.set_faults(drop_after=1)
    first = cloud.submit("server", "r9:0", args, generation=2)
    assert first.dropped
    again = cloud.submit("server", "r9:0", args, generation=2)
    assert again.body["status"] == "already_done"
    cloud.submit("server", "r9:0", args, generation=3)
    with pytest.raises(StaleGeneration):
        cloud.submit("server", "r9:0", args, generation=2)
    cloud.set_faults(fail_before=1)
    with pytest.raises(InjectedFailure):
        cloud.submit("server", "r8:0", args, generation=1)
    log = [(a.key, a.generation, a.answer, a.dropped) for a in cloud.answers()]
    assert log == [
        ("r9:0", 2, "created", True),
        ("r9:0", 2, "already_done", False),
        ("r9:0", 3, "already_done", False),
        ("r9:0", 2, "stale_generation", False),
        ("r8:0", 1, "injected_failure", False),
    ]
    assert [a.key for a in cloud.answers("r8")] == ["r8:0"]
    cloud.reset()
    assert cloud.answers() == []


def test_the_answer_log_is_served_over_http(cloud: Cloud, cloud_http: httpx.Client) -> None:
    args = {"name": "srv-1", "size": "small", "region": "local-1"}
    headers = {"Idempotency-Key": "r7:0", "X-Fencing-Generation": "4"}
    assert cloud_http.post("/v1/servers", json=args, headers=headers).status_code == 201
    body = cloud_http.get("/v1/answers", params={"run": "r7"}).json()
    assert body == {
        "answers": [
            {"seq": 1, "key": "r7:0", "generation": 4, "answer": "created", "dropped": False}
        ]
    }


def test_a_request_waiting_out_its_latency_when_the_cloud_is_reset_never_acts(
    tmp_path: Path,
) -> None:
    from mock_remotes.errors import Forgotten

    with Cloud(tmp_path / "c.sqlite3", latency=1.5) as cloud:
        with pytest.raises(Forgotten, match="reset while key r:0 waited"):
            cloud.submit("server", "r:0", SERVER, generation=1, wait=lambda s: cloud.reset())
        assert cloud.counts() == {"servers": 0, "databases": 0, "dns_records": 0}
