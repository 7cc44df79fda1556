"""HTTP clients: what the model clients (:mod:`agent_runtime.llm.models`) and the cloud's
share, and the cloud's own (the provisioning agent's tools call it).

Each takes an ``httpx.BaseTransport`` so tests can serve it in-process, and retries what
is transient (a connect error, a 5xx, a 408 or 429, a timeout) after exponential waits
with jitter (:mod:`agent_runtime.backoff`; ``sleep`` and ``rand`` are injectable). A 404
or a 405 is never retried: the URL names the wrong service (:class:`WrongEndpoint`).
"""

from __future__ import annotations

import logging
import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any, ClassVar, Final
from urllib.parse import quote

import httpx

from .backoff import Backoff, uniform
from .config import RETRY_BACKOFF, RETRY_BACKOFF_CAP, TOOL_RETRIES
from .errors import (
    RemoteRejected,
    RemoteUnavailable,
    StaleGeneration,
    WrongEndpoint,
)

log = logging.getLogger(__name__)

KEY_HEADER = "Idempotency-Key"
GENERATION_HEADER = "X-Fencing-Generation"
WRONG_ENDPOINT = (404, 405)  # the URL reaches a server that is not the service it names
# Printable ASCII but the space and "%": what a key keeps as it is on the wire.
WIRE_SAFE = "".join(chr(c) for c in range(0x21, 0x7F) if chr(c) != "%")


@dataclass(frozen=True, kw_only=True)
class CallResult:
    result: dict[str, Any]
    remote_status: str  # 'created' | 'already_done'


# Refusals that say "not now" rather than "never": a request timeout and too many
# requests. Sent again under the same key, like a 5xx (the remote did not act on them).
TRANSIENT: Final = (408, 429)


def wire_key(key: str) -> str:
    """The idempotency key as its header carries it: UTF-8, percent-encoded.

    A header value is ASCII, a run id need not be (``rün-日本-🚀:0``). Printable ASCII but
    the space and ``%`` stays as it is, so ``demo:1`` is sent as ``demo:1``; everything
    else becomes ``%XX``. The encoding is deterministic, so every re-send of one intent
    carries the same header, and reversible: the mock cloud decodes it
    (``urllib.parse.unquote``) and keeps the key the journal has.
    """
    return quote(key, safe=WIRE_SAFE)


URLS_KEPT = 64  # joined URLs a client keeps (HttpClient.url)


@cache
def tls_context() -> ssl.SSLContext:
    """One TLS context per process: building one costs 40-100 ms, a worker needs two
    clients, and a supervisor builds it once before forking so workers inherit it."""
    return ssl.create_default_context()


def error_of(response: httpx.Response) -> tuple[str, str]:
    """(error code, detail) of a refusal, from a JSON body when there is one: the mocks'
    ``{"error": code, "detail": ...}`` or the OpenAI shape ``{"error": {"code", "message"}}``."""
    try:
        body = response.json()
    except ValueError:
        return "unknown", response.text[:200]
    if not isinstance(body, dict):
        return "unknown", str(body)[:200]
    error = body.get("error", "unknown")
    if isinstance(error, dict):
        code = error.get("code") or error.get("type") or "unknown"
        return str(code), str(error.get("message", error))[:300]
    return str(error), str(body.get("detail", body))[:300]


class HttpClient:
    """What both clients share: one ``httpx.Client``, and how they wait between attempts.

    ``retries`` extra attempts (default: the client's own, :attr:`default_retries`), the
    first after ``backoff`` seconds, doubled each time, with jitter from ``rand``.
    """

    default_retries: ClassVar[int]

    def __init__(
        self,
        base_url: str,
        *,
        timeout: float,
        retries: int | None = None,
        backoff: float = RETRY_BACKOFF,
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] = time.sleep,
        rand: Callable[[], float] = uniform,
    ) -> None:
        self._http = httpx.Client(
            base_url=base_url, timeout=timeout, transport=transport, verify=tls_context()
        )
        self._retries = self.default_retries if retries is None else retries
        self._backoff = Backoff(base=backoff, cap=RETRY_BACKOFF_CAP, rand=rand)
        self._sleep = sleep
        self._urls: dict[str, httpx.URL] = {}

    def close(self) -> None:
        self._http.close()

    def url(self, path: str) -> httpx.URL:
        """``path`` under the base URL, as httpx joins them, made once per path: a client
        posts to a handful of paths, and joining parses both URLs on every request."""
        url = self._urls.get(path)
        if url is None:
            url = self._http.build_request("POST", path).url
            if len(self._urls) < URLS_KEPT:  # a tool may post to paths without end
                self._urls[path] = url
        return url

    def _pause(self, attempt: int) -> None:
        """Wait before ``attempt`` (0 is the first: no wait)."""
        if attempt:
            self._sleep(self._backoff.delay(attempt))

    def _wrong_endpoint(self, response: httpx.Response, variable: str, what: str) -> WrongEndpoint:
        error, detail = error_of(response)
        return WrongEndpoint(
            f"{self._http.base_url} answered HTTP {response.status_code} {error} to "
            f"{response.request.method} {response.request.url.path} ({detail}): {variable} "
            f"does not point at {what}; fix it and run again, the run is resumable"
        )


class CloudClient(HttpClient):
    """Sends tool calls; a 5xx, a 408 or 429, or a timeout is sent again under the same key."""

    default_retries = TOOL_RETRIES

    def call(self, path: str, args: dict[str, Any], *, key: str, generation: int) -> CallResult:
        """POST one tool call to ``path``; re-send under the same key after a 5xx, a 408 or
        429 (the official clients retry both: "not now"), or a timeout."""
        headers = {KEY_HEADER: wire_key(key), GENERATION_HEADER: str(generation)}
        problem = ""
        for attempt in range(self._retries + 1):
            if attempt:
                log.info("resending key=%s attempt=%d after=%r", key, attempt + 1, problem)
            self._pause(attempt)
            try:
                response = self._http.post(self.url(path), json=args, headers=headers)
            except httpx.TransportError as exc:  # includes timeouts: the remote may have acted
                problem = f"{type(exc).__name__}: {exc}"
                continue
            except httpx.DecodingError as exc:  # it answered, and may have acted: as not JSON
                raise RemoteUnavailable(
                    f"the cloud's answer to key={key} cannot be decoded as its "
                    f"Content-Encoding says ({exc}); the intent stays on record and is "
                    "re-sent on restart"
                ) from exc
            if response.status_code in (200, 201):
                return self._parse(response, key)
            error, detail = error_of(response)
            if response.status_code >= 500 or response.status_code in TRANSIENT:
                problem = f"HTTP {response.status_code} {error}"
                continue
            if error == "stale_generation":
                raise StaleGeneration(
                    f"the cloud refused key={key} from generation {generation}: {detail}"
                )
            if response.status_code in WRONG_ENDPOINT:
                raise self._wrong_endpoint(response, "CLOUD_URL", "the cloud")
            raise RemoteRejected(
                f"the cloud rejected key={key} with HTTP {response.status_code} {error}: {detail}"
            )
        raise RemoteUnavailable(
            f"the cloud did not answer key={key} after {self._retries + 1} attempts "
            f"(last: {problem}); the intent stays on record and is re-sent on restart"
        )

    @staticmethod
    def _parse(response: httpx.Response, key: str) -> CallResult:
        try:
            body = response.json()
        except ValueError as exc:
            raise RemoteUnavailable(f"the cloud's answer to key={key} is not JSON") from exc
        status = body.get("status") if isinstance(body, dict) else None
        if status not in ("created", "already_done") or not isinstance(body.get("id"), str):
            raise RemoteUnavailable(f"the cloud's answer to key={key} is malformed: {body!r:.200}")
        return CallResult(result=body, remote_status=status)
