"""The mock cloud's contract: idempotency keys, refusals, fencing, durability, and reads.

One resource per key however often (and however concurrently) it is sent, a key reused
for other arguments a conflict, a stale fencing generation refused before the key is
looked up, all of it kept across a restart on the same file, and every answer logged.
Its fault knobs are in test_mock_cloud_faults.py, its app and servers in
test_mock_cloud_serving.py.
"""

from __future__ import annotations

import threading
from pathlib import Path

import httpx
import pytest

from mock_remotes import Cloud, cloud_transport
from mock_remotes.errors import InjectedFailure, StaleGeneration

from .mock_requests import DATABASE, DNS, SERVER, create

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


# -- reads, and the answer log -------------------------------------------------------------------


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
