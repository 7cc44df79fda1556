"""The mocks' held requests (``hold_next``): received, answered 504, acted only at a landing.

This is how the suite and the tests make a request outlive its sender: the desk and the
cloud act on it when told to, after the sender gave up, retried, checked or died.
"""

from __future__ import annotations

import httpx

from mock_remotes import Cloud, Support

from .mock_requests import create

MAIL = {"message_id": "r:2", "to": "ada@example.test", "subject": "s", "body": "b"}


def test_a_held_send_acts_only_when_it_lands_and_nobody_hears_its_answer(
    support: Support, support_http: httpx.Client
) -> None:
    support_http.post("/admin/faults", json={"hold_next": 1})

    first = support_http.post("/v1/messages", json=MAIL)

    assert (first.status_code, first.json()["error"]) == (504, "held")
    assert support_http.get("/v1/messages/r:2").json()["delivered"] is False  # not yet
    assert [r["ref"] for r in support_http.get("/admin/held").json()["held"]] == ["r:2"]

    landed = support_http.post("/admin/land").json()["landed"]

    assert [(r["op"], r["answer"]) for r in landed] == [("send_email", "delivered")]
    assert support_http.get("/v1/messages/r:2").json()["deliveries"] == 1
    assert support_http.get("/admin/held").json()["held"] == []
    log = [(a.answer, a.dropped) for a in support.answers(ref="r:2")]
    assert log == [("held", False), ("absent", False), ("delivered", True), ("present", False)]


def test_a_forgotten_held_request_never_acts(support: Support, support_http: httpx.Client) -> None:
    support.set_faults(hold_next=1)
    support_http.post("/v1/messages", json=MAIL)

    forgotten = support_http.post("/admin/forget", json={}).json()["forgotten"]

    assert [r["ref"] for r in forgotten] == ["r:2"]
    assert support_http.post("/admin/land").json()["landed"] == []
    assert support.deliveries(message_id="r:2") == []


def test_a_held_create_that_lands_after_its_key_was_resent_is_already_done(
    cloud: Cloud, cloud_http: httpx.Client
) -> None:
    cloud.set_faults(hold_next=1)
    held = create(cloud_http, "r:0")
    resent = create(cloud_http, "r:0")

    landed = cloud_http.post("/admin/land", json={"ids": [1]}).json()["landed"]

    assert held.status_code == 504 and resent.status_code == 201
    assert [r["answer"] for r in landed] == ["already_done"]  # the key saw to it
    assert cloud.counts()["servers"] == 1


def test_land_refuses_ids_that_are_not_numbers(support_http: httpx.Client) -> None:
    assert support_http.post("/admin/land", json={"ids": ["1"]}).status_code == 422
