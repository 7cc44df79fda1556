"""The mock support desk's knobs, and its reset.

Refusals before acting (reads spared), failed order lookups, answers dropped after
acting, latency past the client's read timeout (without sleeping), and a reset that
forgets everything, a request still waiting out its latency included.
"""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import pytest

from mock_remotes import Support, support_transport

from .mock_requests import TICKET, file, send

# -- knobs ---------------------------------------------------------------------------------------


def test_fail_before_refuses_tickets_and_sends_without_acting_but_spares_reads(
    support_http: httpx.Client, support: Support
) -> None:
    support_http.post("/admin/faults", json={"fail_before": 2})

    lookup = support_http.get("/v1/orders/A-1001")
    ticket = file(support_http)
    email = send(support_http)
    check = support_http.get("/v1/messages/run:2")

    assert lookup.status_code == 200
    assert [ticket.status_code, email.status_code] == [500, 500]
    assert ticket.json()["error"] == email.json()["error"] == "injected_failure"
    assert check.json()["delivered"] is False
    assert (support.tickets(), support.deliveries()) == ([], [])
    assert file(support_http).status_code == 201


def test_fail_lookups_fails_the_next_order_lookups_alone_and_logs_them(
    support_http: httpx.Client, support: Support
) -> None:
    support_http.post("/admin/faults", json={"fail_lookups": 2})

    first, second = (support_http.get("/v1/orders/A-1001") for _ in range(2))
    ticket = file(support_http)
    third = support_http.get("/v1/orders/A-1001")

    assert [first.status_code, second.status_code, third.status_code] == [500, 500, 200]
    assert first.json()["error"] == "injected_failure"
    assert ticket.status_code == 201  # tickets and sends are not its business
    assert third.json()["id"] == "A-1001"
    assert support_http.get("/admin/faults").json()["fail_lookups"] == 0
    lookups = [a.answer for a in support.answers() if a.op == "lookup_order"]
    assert lookups == ["injected_failure", "injected_failure", "found"]


def test_drop_after_delivers_then_loses_the_answer_and_the_check_sees_it(
    support_http: httpx.Client, support: Support
) -> None:
    support.set_faults(drop_after=1)

    with pytest.raises(httpx.ReadTimeout):
        send(support_http)

    assert support_http.get("/v1/messages/run:2").json()["delivered"] is True
    assert len(support.deliveries()) == 1


def test_drop_after_files_the_ticket_and_the_resend_is_already_done(
    support_http: httpx.Client, support: Support
) -> None:
    support.set_faults(drop_after=1)

    with pytest.raises(httpx.ReadTimeout):
        file(support_http)
    resend = file(support_http)

    assert resend.status_code == 200
    assert resend.json()["status"] == "already_done"
    assert len(support.tickets()) == 1


def test_latency_beyond_the_read_timeout_acts_then_times_out_without_sleeping(
    support_http: httpx.Client, support: Support
) -> None:
    support.set_faults(latency=60.0)
    started = time.monotonic()

    with pytest.raises(httpx.ReadTimeout):
        send(support_http, timeout=1.0)

    assert time.monotonic() - started < 1.0
    assert len(support.deliveries()) == 1


@pytest.mark.parametrize("knobs", [{"explode": 1}, {"drop_after": -1}, {"latency": "slow"}, [1]])
def test_bad_fault_knobs_are_refused_with_422(support_http: httpx.Client, knobs: object) -> None:
    assert support_http.post("/admin/faults", json=knobs).status_code == 422


def test_a_faults_call_replaces_only_the_fields_it_names(support_http: httpx.Client) -> None:
    support_http.post("/admin/faults", json={"fail_before": 1, "latency": 0.5})

    shown = support_http.post("/admin/faults", json={"drop_after": 2}).json()

    assert shown == {
        "fail_before": 1,
        "drop_after": 2,
        "latency": 0.5,
        "hang": 30.0,
        "send_latency": 0.0,
        "hold_next": 0,
        "fail_lookups": 0,
    }
    assert support_http.get("/admin/faults").json() == shown


# -- reset --------------------------------------------------------------------------------------


def test_reset_forgets_everything_and_restores_the_starting_latency(tmp_path: Path) -> None:
    with Support(tmp_path / "s.sqlite3", latency=0.25) as support:
        client = httpx.Client(transport=support_transport(support), base_url="http://s")
        file(client)
        send(client)
        support.set_faults(latency=0.0, fail_before=3)

        assert client.post("/admin/reset").json() == {"reset": True}

        assert (support.tickets(), support.deliveries(), support.answers()) == ([], [], [])
        assert support.faults.latency == 0.25
        assert support.faults.fail_before == 0
        support.set_faults(latency=0.0)
        assert file(client).json()["id"] == "T-0000001"


def test_a_request_waiting_out_its_latency_when_the_desk_is_reset_never_acts(
    tmp_path: Path,
) -> None:
    """A sender killed while its request waited at the desk belongs to the state before a
    reset: landing after it would put its ticket into the next world (the property suite
    resets between examples)."""
    from mock_remotes.errors import Forgotten

    with Support(tmp_path / "s.sqlite3", latency=1.5) as support:
        with pytest.raises(Forgotten, match="reset while file_ticket r:1 waited"):
            support.file_ticket("r:1", TICKET, wait=lambda seconds: support.reset())
        assert support.tickets() == []
        support.set_faults(latency=0.0)
        assert support.file_ticket("r:1", TICKET).body["id"] == "T-0000001"  # a new world
