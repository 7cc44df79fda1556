"""Requests to the mock cloud and the mock support desk, as the runtime's tools send them.

Shared by the test_mock_cloud_*, test_mock_support_* and test_mock_inflight modules:
`create` posts a resource under an idempotency key (and a fencing generation, when
given); `file` files a ticket under a key; `send` sends an email (unkeyed: the message
id is in the body).
"""

from __future__ import annotations

from typing import Any

import httpx

# The mock cloud's arguments, one per kind.
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


# The mock support desk's ticket and email.
TICKET = {"order_id": "A-1001", "summary": "Order A-1001 arrived broken (#2)"}
EMAIL = {"to": "ada@example.test", "subject": "Ticket T-0000001", "body": "Sorry!\n"}


def file(
    client: httpx.Client, key: str | None = "run:1", args: object = TICKET, **kw: Any
) -> httpx.Response:
    headers = {} if key is None else {"Idempotency-Key": key}
    headers.update(kw.pop("headers", {}))
    return client.post("/v1/tickets", json=args, headers=headers, **kw)


def send(client: httpx.Client, message_id: str = "run:2", **changes: Any) -> httpx.Response:
    timeout = changes.pop("timeout", 5.0)
    return client.post(
        "/v1/messages", json={"message_id": message_id, **EMAIL, **changes}, timeout=timeout
    )
