"""The mock cloud's faults: its knobs, a reset, and faults injected in the transport.

A refusal before acting, an answer dropped after acting, latency past the client's read
timeout (without sleeping), a reset that forgets everything (a request still waiting out
its latency included), and a connect error or lost answer from `FaultTransport` or respx.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import httpx
import pytest
import respx

from mock_remotes import Cloud, FaultTransport, cloud_transport

from .mock_requests import SERVER, create

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


def test_a_request_waiting_out_its_latency_when_the_cloud_is_reset_never_acts(
    tmp_path: Path,
) -> None:
    from mock_remotes.errors import Forgotten

    with Cloud(tmp_path / "c.sqlite3", latency=1.5) as cloud:
        with pytest.raises(Forgotten, match="reset while key r:0 waited"):
            cloud.submit("server", "r:0", SERVER, generation=1, wait=lambda s: cloud.reset())
        assert cloud.counts() == {"servers": 0, "databases": 0, "dns_records": 0}


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
