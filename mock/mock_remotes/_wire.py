"""The HTTP contract without a web framework: one request in, one answer out.

Both ways of reaching a mock go through `Router.dispatch`: the FastAPI app
(`mock_remotes._asgi`) and the in-process httpx transports
(`mock_remotes.inprocess`). Routing, parsing and error mapping therefore exist
once, and the two paths answer with the same status and the same bytes.

Waiting is the transport's business: a core that must pause (a latency knob)
calls `Call.wait`, and an answer the remote wants to lose (the cloud's
`drop_after` knob) comes back with `Reply.hold` set. Under uvicorn the app
sleeps; in-process the transport raises `httpx.ReadTimeout` instead.
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from mock_remotes.errors import MockError, NotFound

__all__ = ["Call", "Handler", "Reply", "Route", "Router"]

logger = logging.getLogger(__name__)

JSON_TYPE = "application/json"
_PARAM = re.compile(r"\{(\w+)(:path)?\}")


@dataclass(frozen=True, kw_only=True)
class Call:
    """One incoming request, already read from whatever carried it."""

    method: str
    path: str  # percent-decoded, no query string
    query: Mapping[str, str] = field(default_factory=dict)
    headers: Mapping[str, str] = field(default_factory=dict)  # names lower-cased
    body: bytes = b""
    wait: Callable[[float], None] = time.sleep  # how this transport spends seconds

    def header(self, name: str) -> str | None:
        return self.headers.get(name.lower())

    def json(self) -> object:
        """The body as JSON; raises `ValueError` if it is not JSON."""
        return json.loads(self.body)


@dataclass(frozen=True, kw_only=True)
class Reply:
    """One answer: status, body bytes, media type, and whether to lose it."""

    status: int
    content: bytes
    media_type: str = JSON_TYPE
    hold: float | None = None  # seconds: the remote acted, the answer is dropped

    @classmethod
    def of(cls, status: int, body: object, *, hold: float | None = None) -> Reply:
        """A JSON answer."""
        content = json.dumps(body, separators=(",", ":")).encode()
        return cls(status=status, content=content, hold=hold)

    @classmethod
    def error(cls, exc: MockError) -> Reply:
        return cls.of(exc.status, exc.to_json())

    def json(self) -> object:
        return json.loads(self.content)


Handler = Callable[[Call, Mapping[str, str]], Reply]


@dataclass(frozen=True)
class Route:
    """`method template -> handler`; `{name}` matches one segment, `{name:path}` the rest."""

    method: str
    template: str
    handler: Handler
    pattern: re.Pattern[str]

    @property
    def summary(self) -> str:
        doc = self.handler.__doc__ or ""
        return doc.strip().splitlines()[0] if doc.strip() else self.template

    @property
    def name(self) -> str:
        return self.handler.__name__


def _compile(template: str) -> re.Pattern[str]:
    out, pos = [], 0
    for match in _PARAM.finditer(template):
        out.append(re.escape(template[pos : match.start()]))
        body = ".+" if match.group(2) else "[^/]+"
        out.append(f"(?P<{match.group(1)}>{body})")
        pos = match.end()
    out.append(re.escape(template[pos:]))
    return re.compile("".join(out))


class Router:
    """A tiny ordered route table shared by the ASGI app and the transports."""

    def __init__(self) -> None:
        self.routes: list[Route] = []

    def add(self, method: str, template: str, handler: Handler) -> None:
        self.routes.append(Route(method.upper(), template, handler, _compile(template)))

    def route(self, method: str, template: str) -> Callable[[Handler], Handler]:
        """Decorator form of `add`."""

        def register(handler: Handler) -> Handler:
            self.add(method, template, handler)
            return handler

        return register

    def dispatch(self, call: Call) -> Reply:
        """Route `call`; every `MockError` becomes its JSON answer here, nowhere else."""
        allowed: list[str] = []
        for route in self.routes:
            match = route.pattern.fullmatch(call.path)
            if match is None:
                continue
            if route.method != call.method.upper():
                allowed.append(route.method)
                continue
            try:
                return route.handler(call, match.groupdict())
            except MockError as exc:
                logger.debug("refused %s %s: %s %s", call.method, call.path, exc.code, exc)
                return Reply.error(exc)
        if allowed:
            detail = f"{call.method} {call.path} is not served; allowed: {', '.join(allowed)}"
            return Reply.of(405, {"error": "method_not_allowed", "detail": detail})
        return Reply.error(NotFound(f"no route for {call.method} {call.path}"))
