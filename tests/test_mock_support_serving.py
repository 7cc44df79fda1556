"""The mock support desk served: its FastAPI app, and the uvicorn mocks.

The app answers the same bytes as the in-process transport; under uvicorn a dropped
delivery answer is still found by the check, the desk starts only when asked for, and a
reset of the mocks wipes it too.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import pytest

from mock_remotes import MockServers, Support, start_mocks, support_transport
from mock_remotes.support import create_app

from .mock_requests import TICKET, file, send

# -- the FastAPI app, uvicorn -------------------------------------------------------------------


def test_the_fastapi_app_answers_the_same_bytes_as_the_in_process_transport(tmp_path: Path) -> None:
    requests = [
        ("GET", "/v1/orders/A-1001", None, {}),
        ("POST", "/v1/tickets", TICKET, {"Idempotency-Key": "r:1"}),
        ("POST", "/v1/tickets", TICKET, {"Idempotency-Key": "r:1"}),
        ("GET", "/v1/orders/Z-1", None, {}),
        ("GET", "/healthz", None, {}),
    ]

    def through_transport() -> list[tuple[int, bytes]]:
        with (
            Support(tmp_path / "a.sqlite3") as desk,
            httpx.Client(transport=support_transport(desk), base_url="http://s") as client,
        ):
            return [
                (r.status_code, r.content)
                for r in (client.request(m, p, json=b, headers=h) for m, p, b, h in requests)
            ]

    async def through_app() -> list[tuple[int, bytes]]:
        with Support(tmp_path / "b.sqlite3") as desk:
            transport = httpx.ASGITransport(app=create_app(desk))
            async with httpx.AsyncClient(transport=transport, base_url="http://s") as client:
                return [
                    (r.status_code, r.content)
                    for r in [
                        await client.request(m, p, json=b, headers=h) for m, p, b, h in requests
                    ]
                ]

    assert through_transport() == asyncio.run(through_app())


def test_the_uvicorn_desk_drops_a_delivery_answer_and_the_check_sees_the_delivery(
    mock_servers: MockServers,
) -> None:
    mock_servers.reset()
    mock_servers.set_support_faults(drop_after=1)

    with httpx.Client(base_url=mock_servers.support_url) as client:
        with pytest.raises(httpx.ReadTimeout):
            send(client, "uv:2", timeout=0.5)
        check = client.get("/v1/messages/uv:2").json()
        assert file(client, "uv:1").status_code == 201

    assert check["delivered"] is True
    assert [d["message_id"] for d in mock_servers.deliveries("uv:2")] == ["uv:2"]
    assert [t["key"] for t in mock_servers.tickets("uv")] == ["uv:1"]


def test_start_mocks_leaves_the_support_desk_out_unless_asked(tmp_path: Path) -> None:
    with start_mocks(tmp_path) as mocks:
        assert mocks.support is None
        assert [m.name for m in mocks.running] == ["cloud", "model"]
        with pytest.raises(RuntimeError, match=r"start_mocks\(\.\.\., support=True\)"):
            _ = mocks.support_url
        mocks.reset()  # without the desk too


def test_resetting_the_uvicorn_mocks_wipes_the_support_desk_too(mock_servers: MockServers) -> None:
    mock_servers.reset()
    with httpx.Client(base_url=mock_servers.support_url) as client:
        file(client, "wipe:1")
        send(client, "wipe:2")
    mock_servers.set_support_faults(fail_before=1)

    mock_servers.reset()

    assert (mock_servers.tickets(), mock_servers.deliveries()) == ([], [])
    with httpx.Client(base_url=mock_servers.support_url) as client:
        assert client.get("/admin/faults").json()["fail_before"] == 0
