"""Serve a `Router` as a FastAPI app (the standalone, uvicorn face of a mock).

Every route of the table is registered for the OpenAPI page, plus one catch-all,
and all of them hand the raw request to `Router.dispatch` in a worker thread, so
uvicorn answers exactly what the in-process transport answers. An answer the
core wants dropped (`Reply.hold`) is held that many seconds before it is sent
(or until the client hangs up): a client with a shorter read timeout sees the
remote act and never hears back.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import anyio
from fastapi import FastAPI, Request, Response
from starlette.concurrency import run_in_threadpool
from starlette.types import Lifespan

from mock_remotes._wire import Call, Router

__all__ = ["build_app"]

_ALL_METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE"]
HOLD_POLL = 0.05  # seconds between checks that a client is still waiting for a dropped answer


async def _hold(request: Request, seconds: float) -> None:
    """Sit on a dropped answer for `seconds`, or until the client hangs up."""
    deadline = anyio.current_time() + seconds
    while anyio.current_time() < deadline:
        if await request.is_disconnected():
            return
        await anyio.sleep(min(HOLD_POLL, max(deadline - anyio.current_time(), 0.0)))


def build_app(
    router: Router, *, title: str, description: str, lifespan: Lifespan[FastAPI] | None = None
) -> FastAPI:
    """A FastAPI app whose every request is answered by `router.dispatch`."""
    app = FastAPI(title=title, description=description, lifespan=lifespan)

    async def endpoint(request: Request) -> Response:
        call = Call(
            method=request.method,
            path=request.scope["path"],
            query=dict(request.query_params),
            headers={name.lower(): value for name, value in request.headers.items()},
            body=await request.body(),
            wait=time.sleep,  # runs in a worker thread, not on the event loop
        )
        reply = await run_in_threadpool(router.dispatch, call)
        if reply.hold is not None:
            await _hold(request, reply.hold)
        return Response(reply.content, status_code=reply.status, media_type=reply.media_type)

    for route in router.routes:
        app.add_api_route(
            route.template,
            endpoint,
            methods=[route.method],
            name=route.name,
            summary=route.summary,
            description=(route.handler.__doc__ or "").strip(),
        )
    app.add_api_route(
        "/{rest:path}", endpoint, methods=_ALL_METHODS, name="fallback", include_in_schema=False
    )
    return app


def lazy_app(module: str, build: Callable[[], FastAPI]) -> Callable[[str], Any]:
    """A module ``__getattr__`` serving ``app``, built by ``build`` on first access.

    ``uvicorn mock_remotes.cloud:app`` reads the environment only when it asks for
    ``app``; importing the module for ``create_app`` builds nothing.
    """
    built: list[FastAPI] = []

    def __getattr__(name: str) -> Any:
        if name == "app":
            if not built:
                built.append(build())
            return built[0]
        raise AttributeError(f"module {module!r} has no attribute {name!r}")

    return __getattr__
