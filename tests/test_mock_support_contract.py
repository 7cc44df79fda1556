"""The mock support desk's contract: an order catalogue, keyed tickets, an unkeyed mailbox.

Orders are read, tickets filed once per key (a key reused for other arguments a
conflict), emails delivered as often as they are sent and found by the check; every
operation's answer is logged, and all of it is kept across a restart on the same file.
Its knobs are in test_mock_support_faults.py, its app and servers in
test_mock_support_serving.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from mock_remotes import Support, support_transport
from mock_remotes.supportcore import ORDERS

from .mock_requests import EMAIL, TICKET, file, send

# -- orders (read) -------------------------------------------------------------------------------


def test_an_order_lookup_answers_its_customer_email_and_items(support_http: httpx.Client) -> None:
    response = support_http.get("/v1/orders/A-1001")

    assert response.status_code == 200
    order = response.json()
    assert (order["id"], order["customer"], order["email"]) == (
        "A-1001",
        "Ada Lovelace",
        "ada@example.test",
    )
    assert order["items"] == [{"sku": "MUG-01", "name": "Enamel mug", "quantity": 2}]


def test_an_unknown_order_is_a_404_naming_the_catalogue(support_http: httpx.Client) -> None:
    response = support_http.get("/v1/orders/Z-9999")

    assert response.status_code == 404
    assert response.json()["error"] == "unknown_order"
    assert "A-1001" in response.json()["detail"]


def test_the_catalogue_lists_every_order(support_http: httpx.Client) -> None:
    orders = support_http.get("/v1/orders").json()["orders"]

    assert [o["id"] for o in orders] == list(ORDERS) == ["A-1001", "A-1002", "B-2001"]


def test_changing_a_looked_up_order_does_not_change_the_catalogue(support: Support) -> None:
    support.order("A-1001")["email"] = "someone@else.test"

    assert support.order("A-1001")["email"] == "ada@example.test"


# -- tickets (keyed) ------------------------------------------------------------------------------


def test_the_first_ticket_under_a_key_is_created(
    support_http: httpx.Client, support: Support
) -> None:
    response = file(support_http)

    assert response.status_code == 201
    assert response.json() == {"id": "T-0000001", "status": "created", **TICKET}
    assert [t.id for t in support.tickets()] == ["T-0000001"]


def test_a_repeated_key_returns_the_first_ticket_as_already_done(
    support_http: httpx.Client, support: Support
) -> None:
    first = file(support_http).json()
    again = file(support_http)

    assert again.status_code == 200
    assert again.json() == {**first, "status": "already_done"}
    assert len(support.tickets()) == 1


def test_a_repeated_key_with_other_arguments_is_a_key_conflict(
    support_http: httpx.Client, support: Support
) -> None:
    file(support_http)

    response = file(support_http, args={**TICKET, "summary": "something else"})

    assert response.status_code == 409
    assert response.json()["error"] == "key_conflict"
    assert len(support.tickets()) == 1


def test_every_new_key_files_the_next_ticket_and_tickets_filter_by_run(
    support_http: httpx.Client,
) -> None:
    ids = [file(support_http, key).json()["id"] for key in ("a:1", "b:1", "a:2")]

    assert ids == ["T-0000001", "T-0000002", "T-0000003"]
    of_a = support_http.get("/v1/tickets", params={"run": "a"}).json()
    assert of_a["total"] == 2
    assert [t["key"] for t in of_a["tickets"]] == ["a:1", "a:2"]
    assert set(of_a["tickets"][0]) == {"key", "id", "args", "result", "created_at"}


@pytest.mark.parametrize("key", [None, "", "  "])
def test_a_ticket_without_an_idempotency_key_is_refused_with_400(
    support_http: httpx.Client, support: Support, key: str | None
) -> None:
    response = file(support_http, key)

    assert response.status_code == 400
    assert response.json()["error"] == "missing_idempotency_key"
    assert support.tickets() == []


@pytest.mark.parametrize(
    "args",
    [
        {"order_id": "A-1001"},
        {**TICKET, "priority": "high"},
        {**TICKET, "summary": 7},
        {**TICKET, "summary": " "},
        ["A-1001", "broken"],
    ],
)
def test_bad_ticket_arguments_are_refused_with_422(
    support_http: httpx.Client, support: Support, args: object
) -> None:
    response = file(support_http, args=args)

    assert response.status_code == 422
    assert response.json()["error"] == "invalid_args"
    assert support.tickets() == []


def test_a_ticket_body_that_is_not_json_is_refused_with_422(support_http: httpx.Client) -> None:
    response = support_http.post(
        "/v1/tickets", content=b"{order", headers={"Idempotency-Key": "r:1"}
    )

    assert response.status_code == 422
    assert response.json()["error"] == "invalid_args"


# -- the mailbox (checked) -----------------------------------------------------------------------


def test_a_sent_email_is_delivered_and_the_check_finds_it(support_http: httpx.Client) -> None:
    before = support_http.get("/v1/messages/run:2").json()
    sent = send(support_http)
    after = support_http.get("/v1/messages/run:2").json()

    assert before == {"message_id": "run:2", "delivered": False, "deliveries": 0, "first": None}
    assert sent.status_code == 201
    assert sent.json()["status"] == "delivered"
    assert sent.json()["id"] == "M-0000001"
    assert after["delivered"] is True
    assert after["deliveries"] == 1
    assert after["first"] == {k: v for k, v in sent.json().items() if k != "status"}


def test_sending_the_same_message_twice_delivers_it_twice(
    support_http: httpx.Client, support: Support
) -> None:
    first = send(support_http).json()
    second = send(support_http).json()

    assert (first["id"], second["id"]) == ("M-0000001", "M-0000002")
    assert support_http.get("/v1/messages/run:2").json()["deliveries"] == 2
    assert [d.message_id for d in support.deliveries()] == ["run:2", "run:2"]


def test_deliveries_can_be_listed_by_message_id_and_by_run(support_http: httpx.Client) -> None:
    send(support_http, "a:2")
    send(support_http, "b:2")
    send(support_http, "a:5")

    everything = support_http.get("/v1/messages").json()
    of_one = support_http.get("/v1/messages", params={"message_id": "a:2"}).json()
    of_run = support_http.get("/v1/messages", params={"run": "a"}).json()

    assert everything["total"] == 3
    assert [m["message_id"] for m in of_one["messages"]] == ["a:2"]
    assert [m["message_id"] for m in of_run["messages"]] == ["a:2", "a:5"]
    assert set(everything["messages"][0]) == {
        "id",
        "message_id",
        "to",
        "subject",
        "body",
        "delivered_at",
    }


@pytest.mark.parametrize(
    "changes",
    [
        {"to": "nobody"},
        {"to": "two@one@example.test"},
        {"to": "ada @example.test"},
        {"message_id": ""},
        {"subject": 3},
        {"cc": "boss@example.test"},
    ],
)
def test_bad_email_arguments_are_refused_with_422_and_nothing_is_delivered(
    support_http: httpx.Client, support: Support, changes: dict[str, Any]
) -> None:
    response = send(support_http, **changes)

    assert response.status_code == 422
    assert response.json()["error"] == "invalid_args"
    assert support.deliveries() == []


def test_an_email_body_that_is_not_json_is_refused_with_422(support_http: httpx.Client) -> None:
    assert support_http.post("/v1/messages", content=b"to=ada").status_code == 422


# -- the answer log, durability -----------------------------------------------------------------


def test_every_operation_is_logged_with_its_answer_in_order(
    support_http: httpx.Client, support: Support
) -> None:
    support_http.get("/v1/orders/A-1001")
    support_http.get("/v1/orders/nope")
    file(support_http)
    file(support_http)
    support_http.get("/v1/messages/run:2")
    support.set_faults(drop_after=1)
    with pytest.raises(httpx.ReadTimeout):
        send(support_http)
    send(support_http, to="bad")
    support_http.get("/v1/messages")  # listings are for tests: not logged

    log = support_http.get("/v1/answers").json()["answers"]

    assert [(a["op"], a["ref"], a["answer"], a["dropped"]) for a in log] == [
        ("lookup_order", "A-1001", "found", False),
        ("lookup_order", "nope", "unknown_order", False),
        ("file_ticket", "run:1", "created", False),
        ("file_ticket", "run:1", "already_done", False),
        ("check_message", "run:2", "absent", False),
        ("send_email", "run:2", "delivered", True),
        ("send_email", "run:2", "invalid_args", False),
    ]
    assert [a["seq"] for a in log] == list(range(1, 8))
    sends = support_http.get("/v1/answers", params={"op": "send_email", "ref": "run:2"}).json()
    assert len(sends["answers"]) == 2


def test_the_answer_log_records_each_requests_fencing_generation_without_enforcing_it(
    support_http: httpx.Client,
) -> None:
    fence = {"X-Fencing-Generation": "3"}
    support_http.get("/v1/orders/A-1001", headers=fence)
    file(support_http, headers={"X-Fencing-Generation": "2"})
    file(support_http, headers={"X-Fencing-Generation": "1"})  # older: still answered
    support_http.get("/v1/messages/run:2", headers=fence)
    support_http.post(
        "/v1/messages", json={"message_id": "run:2", **EMAIL}, headers=fence
    ).raise_for_status()
    send(support_http)  # no header: no generation

    log = support_http.get("/v1/answers").json()["answers"]

    assert [(a["op"], a["answer"], a["generation"]) for a in log] == [
        ("lookup_order", "found", 3),
        ("file_ticket", "created", 2),
        ("file_ticket", "already_done", 1),
        ("check_message", "absent", 3),
        ("send_email", "delivered", 3),
        ("send_email", "delivered", None),
    ]
    bad = support_http.get("/v1/orders/A-1001", headers={"X-Fencing-Generation": "two"})
    assert bad.status_code == 400
    assert "X-Fencing-Generation must be an integer" in bad.json()["detail"]


def test_a_new_desk_on_the_same_file_remembers_tickets_deliveries_and_counters(
    tmp_path: Path,
) -> None:
    store = tmp_path / "support.sqlite3"
    with (
        Support(store) as before,
        httpx.Client(transport=support_transport(before), base_url="http://s") as client,
    ):
        first = file(client).json()
        send(client)

    with (
        Support(store) as after,
        httpx.Client(transport=support_transport(after), base_url="http://s") as client,
    ):
        assert file(client).json() == {**first, "status": "already_done"}
        assert file(client, "run:9").json()["id"] == "T-0000002"
        assert send(client).json()["id"] == "M-0000002"
        assert client.get("/v1/messages/run:2").json()["deliveries"] == 2
