"""Requests to the mock cloud, as the runtime's tools send them.

Shared by the test_mock_cloud_* and test_mock_inflight modules: `create` posts a
resource under an idempotency key (and a fencing generation, when given).
"""

from __future__ import annotations

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
