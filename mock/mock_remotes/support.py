"""The mock support desk as a FastAPI app.

Standalone::

    MOCK_SUPPORT_DB=./mock-support.sqlite3 MOCK_SUPPORT_LATENCY=0.2 \
        uvicorn mock_remotes.support:app --port 8003

`app` is built on first access from the environment (`MOCK_SUPPORT_DB`, default
`./mock-support.sqlite3`; `MOCK_SUPPORT_LATENCY`, seconds). Code builds its own
with `create_app(store_path)`; tests that want no sockets use
`mock_remotes.inprocess.support_transport` instead.
"""

from __future__ import annotations

import logging
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from mock_remotes._asgi import build_app, lazy_app
from mock_remotes._store import Synchronous
from mock_remotes.supportcore import Support
from mock_remotes.supportroutes import support_router

__all__ = ["DEFAULT_DB", "create_app"]  # and `app`, built lazily

logger = logging.getLogger(__name__)

DEFAULT_DB = "./mock-support.sqlite3"


def create_app(
    store_path: str | os.PathLike[str] | Support,
    *,
    latency: float = 0.0,
    synchronous: Synchronous = "FULL",
) -> FastAPI:
    """The mock support desk over the SQLite file `store_path` (or an open `Support`).

    A `Support` the app opened itself is closed when the app shuts down; it is
    also reachable as `app.state.support`.
    """
    if isinstance(store_path, Support):
        support, owned = store_path, False
    else:
        support, owned = Support(store_path, latency=latency, synchronous=synchronous), True

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        yield
        if owned:
            support.close()

    app = build_app(
        support_router(support),
        title="mock support desk",
        description="Orders to look up, tickets behind idempotency keys, a mailbox to check.",
        lifespan=lifespan,
    )
    app.state.support = support
    return app


def _from_env() -> FastAPI:
    path = os.environ.get("MOCK_SUPPORT_DB") or DEFAULT_DB
    latency = float(os.environ.get("MOCK_SUPPORT_LATENCY") or 0.0)
    logger.info("mock support from environment db=%s latency=%s", path, latency)
    return create_app(path, latency=latency)


__getattr__ = lazy_app(__name__, _from_env)
