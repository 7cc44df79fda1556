"""Mock remote fixtures: the cloud, the model, the support desk; in-process or under uvicorn.

- `cloud` / `model` / `support`: fresh cores (SQLite ones on a tmp file), per test;
- `cloud_http` / `model_http` / `support_http`: `httpx.Client`s over socket-free
  transports to them;
- `mock_servers`: the three mocks as real uvicorn subprocesses, once per session
  (call `mock_servers.reset()` first: other tests share them);
- `llm` / `any_llm`: the official `openai` client over `model`'s transport, or over each
  way to a model (in process, under uvicorn) with a plain client beside it for the
  counters (tests/chat_client.py; `openai` is imported only by the tests that ask).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import httpx
import pytest

from mock_remotes import (
    Cloud,
    MockServers,
    Model,
    Support,
    cloud_transport,
    model_transport,
    start_mocks,
    support_transport,
)

if TYPE_CHECKING:
    import openai


@pytest.fixture
def cloud(tmp_path: Path) -> Iterator[Cloud]:
    """A fresh mock cloud on its own SQLite file."""
    with Cloud(tmp_path / "mock-cloud.sqlite3") as fresh:
        yield fresh


@pytest.fixture
def model() -> Model:
    """A fresh mock model counting in memory."""
    return Model()


@pytest.fixture
def cloud_http(cloud: Cloud) -> Iterator[httpx.Client]:
    """A client for `cloud`, no sockets (base_url http://cloud)."""
    with httpx.Client(transport=cloud_transport(cloud), base_url="http://cloud") as client:
        yield client


@pytest.fixture
def model_http(model: Model) -> Iterator[httpx.Client]:
    """A client for `model`, no sockets (base_url http://model)."""
    with httpx.Client(transport=model_transport(model), base_url="http://model") as client:
        yield client


@pytest.fixture
def support(tmp_path: Path) -> Iterator[Support]:
    """A fresh mock support desk on its own SQLite file."""
    with Support(tmp_path / "mock-support.sqlite3") as fresh:
        yield fresh


@pytest.fixture
def support_http(support: Support) -> Iterator[httpx.Client]:
    """A client for `support`, no sockets (base_url http://support)."""
    with httpx.Client(transport=support_transport(support), base_url="http://support") as client:
        yield client


@pytest.fixture(scope="session")
def mock_servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MockServers]:
    """The three mocks under uvicorn on free 127.0.0.1 ports; stopped at session end."""
    servers = start_mocks(tmp_path_factory.mktemp("mock-servers"), support=True)
    try:
        yield servers
    finally:
        servers.stop()


@pytest.fixture
def llm(model: Model) -> Iterator[openai.OpenAI]:
    """The official client over the in-process transport of a fresh model."""
    from .chat_client import client_for

    with httpx.Client(transport=model_transport(model)) as http_client:
        yield client_for(http_client, "http://model/v1")


@pytest.fixture(params=["in-process", "uvicorn"])
def any_llm(request: pytest.FixtureRequest) -> Iterator[tuple[openai.OpenAI, httpx.Client]]:
    """The official client, and a plain one for the counters, over each way to the model."""
    from .chat_client import client_for

    if request.param == "in-process":
        model = Model()
        with httpx.Client(transport=model_transport(model), base_url="http://model") as plain:
            yield client_for(plain, "http://model/v1"), plain
        return
    servers: MockServers = request.getfixturevalue("mock_servers")
    servers.reset()
    with httpx.Client(base_url=servers.model_url) as plain:
        yield client_for(plain, f"{servers.model_url}/v1"), plain
