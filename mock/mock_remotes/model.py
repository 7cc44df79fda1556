"""The mock model as a FastAPI app.

Standalone::

    MOCK_MODEL_STATE=./mock-model.json MOCK_MODEL_LATENCY=0.5 \
        uvicorn mock_remotes.model:app --port 8002

`app` is built on first access from the environment (`MOCK_MODEL_STATE`: JSON
file keeping the call counts across restarts, unset = in memory;
`MOCK_MODEL_LATENCY`, seconds). Code builds its own with `create_app()`; tests
that want no sockets use `mock_remotes.inprocess.model_transport` instead.
"""

from __future__ import annotations

import logging
import os

from fastapi import FastAPI

from mock_remotes._asgi import build_app, lazy_app
from mock_remotes.modelcore import Model
from mock_remotes.modelroutes import model_router

__all__ = ["create_app"]  # and `app`, built lazily

logger = logging.getLogger(__name__)


def create_app(
    state_path: str | os.PathLike[str] | Model | None = None, *, latency: float = 0.0
) -> FastAPI:
    """The mock model app, counting in memory or in the JSON file `state_path`.

    An existing `Model` may be passed instead; it is reachable as `app.state.model`.
    """
    model = state_path if isinstance(state_path, Model) else Model(state_path, latency=latency)
    app = build_app(
        model_router(model),
        title="mock model",
        description="Names the next tool call of a run; every name carries its call count.",
    )
    app.state.model = model
    return app


def _from_env() -> FastAPI:
    state = os.environ.get("MOCK_MODEL_STATE") or None
    latency = float(os.environ.get("MOCK_MODEL_LATENCY") or 0.0)
    logger.info("mock model from environment state=%s latency=%s", state, latency)
    return create_app(state, latency=latency)


__getattr__ = lazy_app(__name__, _from_env)
