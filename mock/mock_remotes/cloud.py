"""The mock cloud as a FastAPI app.

Standalone::

    MOCK_CLOUD_DB=./mock-cloud.sqlite3 MOCK_CLOUD_LATENCY=0.2 \
        uvicorn mock_remotes.cloud:app --port 8001

`app` is built on first access from the environment (`MOCK_CLOUD_DB`, default
`./mock-cloud.sqlite3`; `MOCK_CLOUD_LATENCY`, seconds). Code builds its own with
`create_app(store_path)`; tests that want no sockets use
`mock_remotes.inprocess.cloud_transport` instead.
"""

from __future__ import annotations

import logging
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from mock_remotes._asgi import build_app, lazy_app
from mock_remotes.cloudcore import Cloud, Synchronous
from mock_remotes.cloudroutes import cloud_router

__all__ = ["DEFAULT_DB", "create_app"]  # and `app`, built lazily

logger = logging.getLogger(__name__)

DEFAULT_DB = "./mock-cloud.sqlite3"


def create_app(
    store_path: str | os.PathLike[str] | Cloud,
    *,
    latency: float = 0.0,
    synchronous: Synchronous = "FULL",
) -> FastAPI:
    """The mock cloud app over the SQLite file `store_path` (or an open `Cloud`).

    A `Cloud` the app opened itself is closed when the app shuts down; the `Cloud`
    is also reachable as `app.state.cloud`.
    """
    if isinstance(store_path, Cloud):
        cloud, owned = store_path, False
    else:
        cloud, owned = Cloud(store_path, latency=latency, synchronous=synchronous), True

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        yield
        if owned:
            cloud.close()

    app = build_app(
        cloud_router(cloud),
        title="mock cloud",
        description="Servers, databases and DNS records behind idempotency keys.",
        lifespan=lifespan,
    )
    app.state.cloud = cloud
    return app


def _from_env() -> FastAPI:
    path = os.environ.get("MOCK_CLOUD_DB") or DEFAULT_DB
    latency = float(os.environ.get("MOCK_CLOUD_LATENCY") or 0.0)
    logger.info("mock cloud from environment db=%s latency=%s", path, latency)
    return create_app(path, latency=latency)


__getattr__ = lazy_app(__name__, _from_env)
