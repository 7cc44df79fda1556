"""The mock cloud served: its FastAPI app, the uvicorn mocks, and the package's names.

The app answers the same bytes as the in-process transport; under uvicorn a dropped
answer still acted, restarted mocks on one data dir remember, and a mock that cannot
start leaves none running.
"""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path

import httpx
import pytest

import mock_remotes
from mock_remotes import Cloud, MockServers, cloud_transport, start_mocks
from mock_remotes.cloud import create_app
from mock_remotes.serve import MockStartError

from .mock_requests import SERVER, create

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
