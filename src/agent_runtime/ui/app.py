"""The dashboard's ASGI app, built by one function, and the server that runs it.

:func:`build_app` puts together the pages (:mod:`.pages`), the actions (:mod:`.actions`),
the login for a token (:mod:`.guard`) and the error pages: an
:class:`~agent_runtime.errors.AgentRuntimeError` becomes a page with its one line and the
status that fits (400 bad input, 404 no such run, 409 the run is not in a state for it,
503 the database), anything else a 500 page with one line (the traceback goes to the log,
never to the page). Another ASGI app mounts beside the pages in one line
(``/metrics`` is mounted so: :func:`agent_runtime.observe.metrics.asgi_app`).
:func:`serve` binds the socket itself (so a port in use is one line, exit 2) and runs
uvicorn on it.
"""

from __future__ import annotations

import errno
import logging
import socket
from collections.abc import Awaitable, Callable

import uvicorn
from fastapi import FastAPI, Request
from starlette.exceptions import HTTPException
from starlette.responses import RedirectResponse, Response

from agent_runtime import config
from agent_runtime.errors import (
    AgentRuntimeError,
    ConfigError,
    DatabaseError,
    RunNotFound,
    RunUnavailable,
)
from agent_runtime.observe import metrics

from . import actions, pages
from .guard import COOKIE, Guard
from .render import page

log = logging.getLogger(__name__)
OPEN = frozenset({"/login", "/healthz"})  # paths answered without the token


def _status(exc: AgentRuntimeError) -> int:
    if isinstance(exc, RunNotFound):
        return 404
    if isinstance(exc, ConfigError):
        return 400
    if isinstance(exc, RunUnavailable):
        return 409
    if isinstance(exc, DatabaseError):
        return 503
    return 500


def _error(status: int, message: str, heading: str = "") -> Response:
    titles = {400: "Bad request", 401: "Token needed", 403: "Refused", 404: "Not found"}
    title = heading or titles.get(status, "Cannot do that now")
    return page("error.html", status, title=title, message=message, status=status, live=False)


def build_app(settings: config.Settings, url: str, guard: Guard | None = None) -> FastAPI:
    """The dashboard over the journal at ``url``; ``settings`` are the CLI's (``resolve``
    re-sends through a worker built from them)."""
    guard = guard or Guard()
    app = FastAPI(title="crashresume", docs_url=None, redoc_url=None, openapi_url=None)
    app.state.dashboard = pages.Dashboard(settings=settings, url=url, guard=guard)
    app.include_router(pages.router)
    app.include_router(actions.router)
    app.mount("/metrics", metrics.asgi_app(url))  # the journal's counts, behind the token too

    @app.middleware("http")
    async def admit(
        request: Request, call_next: Callable[[Request], Awaitable[Response]]
    ) -> Response:
        refusal = guard.host_refusal(request.headers.get("host"))
        if refusal is not None:
            return _error(403, refusal)
        path = request.url.path
        authenticated = guard.authenticated(
            request.cookies.get(COOKIE), request.headers.get("authorization")
        )
        if not authenticated and path not in OPEN:
            log.warning(
                "ui-refused path=%s client=%s reason=no-token",
                path,
                request.client.host if request.client else "unknown",
            )
            if request.method == "GET":
                return page(
                    "login.html",
                    401,
                    title="Token needed",
                    csrf=guard.csrf("", "login"),
                    then=str(request.url.path)
                    + ("?" + request.url.query if request.url.query else ""),
                    failed=False,
                    live=False,
                )
            return _error(401, "refused: this dashboard needs its token (log in at /login)")
        return await call_next(request)

    @app.exception_handler(AgentRuntimeError)
    async def journal_error(request: Request, exc: AgentRuntimeError) -> Response:
        return _error(_status(exc), str(exc))

    @app.exception_handler(actions.Refused)
    async def refused(request: Request, exc: actions.Refused) -> Response:
        return _error(exc.status, str(exc))

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, exc: HTTPException) -> Response:
        return _error(exc.status_code, str(exc.detail))

    @app.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception) -> Response:
        log.error(
            "ui-unexpected path=%s error=%r",
            request.url.path,
            f"{type(exc).__name__}: {exc}",
            exc_info=exc,
        )
        return _error(500, f"unexpected error ({type(exc).__name__}); the log has the details")

    @app.get("/healthz")
    def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/login")
    def login_form(request: Request) -> Response:
        return page(
            "login.html",
            title="Token needed",
            csrf=guard.csrf("", "login"),
            then=request.query_params.get("then", "/"),
            failed=False,
            live=False,
        )

    @app.post("/login")
    async def login(request: Request) -> Response:
        form = await actions.read_form(request)
        actions.check_post(request, form, "", "login")
        then = form.get("then") or "/"
        if not then.startswith("/") or then.startswith("//"):
            then = "/"  # only this server's own pages
        if guard.token is None:
            return RedirectResponse(then, status_code=303)
        if not guard.token_matches(form.get("token", "")):
            log.warning(
                "ui-login-refused client=%s", request.client.host if request.client else "unknown"
            )
            return page(
                "login.html",
                401,
                title="Token needed",
                csrf=guard.csrf("", "login"),
                then=then,
                failed=True,
                live=False,
            )
        response = RedirectResponse(then, status_code=303)
        response.set_cookie(COOKIE, guard.session(), httponly=True, samesite="strict", path="/")
        return response

    return app


def listen(host: str, port: int) -> socket.socket:
    """A listening socket on ``host:port`` (0: any free port); ConfigError if it cannot be."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        family, kind, proto, _, address = infos[0]
        sock = socket.socket(family, kind, proto)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
    except OSError as exc:
        busy = exc.errno == errno.EADDRINUSE
        hint = " (another process has it: choose another with --port)" if busy else ""
        raise ConfigError(f"cannot listen on {host}:{port}: {exc.strerror or exc}{hint}") from exc
    sock.listen(128)
    return sock


def serve(app: FastAPI, sock: socket.socket) -> None:
    """Serve ``app`` on ``sock`` until interrupted."""
    server = uvicorn.Server(
        uvicorn.Config(app, log_config=None, access_log=False, lifespan="off", log_level="info")
    )
    server.run(sockets=[sock])
