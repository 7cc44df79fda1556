"""What a client really sent: an httpx transport that keeps every request and answer.

Wrap any transport (an in-process mock's, ``httpx.HTTPTransport()`` for a real socket,
an ``httpx.MockTransport``) and hand the wrapper to the runtime; each exchange is kept
as the bytes went out, so tests assert on the wire and not on how the client built it.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from typing import Any

import httpx

# Headers that described the body as it travelled; the kept body is already decoded.
DECODED = ("content-encoding", "content-length", "transfer-encoding")


@dataclass(frozen=True, kw_only=True)
class Exchange:
    method: str
    url: str  # the request's full URL
    path: str
    headers: dict[str, str]  # lower-case names
    body: bytes
    status: int | None  # None: no answer (the transport raised)
    answer: bytes

    def json(self) -> Any:
        return json.loads(self.body)

    def answer_json(self) -> Any:
        return json.loads(self.answer)


class Recording(httpx.BaseTransport):
    """Forwards every request to ``inner`` and keeps the exchange, in order."""

    def __init__(self, inner: httpx.BaseTransport) -> None:
        self.inner = inner
        self.exchanges: list[Exchange] = []
        self._lock = threading.Lock()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        body = request.read()
        status: int | None = None
        answer = b""
        try:
            response = self.inner.handle_request(request)
            answer = response.read()
            status = response.status_code
            headers = [(k, v) for k, v in response.headers.items() if k.lower() not in DECODED]
            return httpx.Response(status, headers=headers, content=answer, request=request)
        finally:
            with self._lock:
                self.exchanges.append(
                    Exchange(
                        method=request.method,
                        url=str(request.url),
                        path=request.url.path,
                        headers={k.lower(): v for k, v in request.headers.items()},
                        body=body,
                        status=status,
                        answer=answer,
                    )
                )

    def close(self) -> None:
        self.inner.close()

    def posts(self, path_end: str) -> list[Exchange]:
        """The POSTs whose path ends with ``path_end``, in order."""
        return [e for e in self.exchanges if e.method == "POST" and e.path.endswith(path_end)]

    def chat_bodies(self) -> list[dict[str, Any]]:
        """The JSON body of every Chat Completions request, in order."""
        return [e.json() for e in self.posts("/chat/completions")]
