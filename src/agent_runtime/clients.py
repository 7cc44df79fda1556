"""HTTP clients of the two remotes: the model that decides, the cloud that acts.

Both take an ``httpx.BaseTransport`` so tests can serve them in-process.
"""

from __future__ import annotations

import json
import logging
import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any

import httpx

from .errors import (
    MalformedAnswer,
    ModelError,
    RemoteRejected,
    RemoteUnavailable,
    StaleGeneration,
)
from .tools import Tool

log = logging.getLogger(__name__)

KEY_HEADER = "Idempotency-Key"
GENERATION_HEADER = "X-Fencing-Generation"


@dataclass(frozen=True, kw_only=True)
class CallResult:
    result: dict[str, Any]
    remote_status: str  # 'created' | 'already_done'


@cache
def tls_context() -> ssl.SSLContext:
    """One TLS context per process: building one costs 40-100 ms, a worker needs two
    clients, and a supervisor builds it once before forking so workers inherit it."""
    return ssl.create_default_context()


def _error_of(response: httpx.Response) -> tuple[str, str]:
    try:
        body = response.json()
    except ValueError:
        return "unknown", response.text[:200]
    if isinstance(body, dict):
        return str(body.get("error", "unknown")), str(body.get("detail", body))[:300]
    return "unknown", str(body)[:200]


class ModelClient:
    def __init__(
        self,
        base_url: str,
        *,
        timeout: float,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self._http = httpx.Client(
            base_url=base_url, timeout=timeout, transport=transport, verify=tls_context()
        )

    def close(self) -> None:
        self._http.close()

    def decide(self, run_id: str, history: list[dict[str, Any]]) -> object:
        """Ask for the next step. Returns the raw answer; parsing is the caller's."""
        try:
            response = self._http.post("/v1/decide", json={"run_id": run_id, "history": history})
        except httpx.TimeoutException as exc:
            raise ModelError(f"the model did not answer in time: {exc!r}") from exc
        except httpx.TransportError as exc:
            raise ModelError(f"cannot reach the model at {self._http.base_url}: {exc!r}") from exc
        if response.status_code != 200:
            error, detail = _error_of(response)
            raise ModelError(f"the model answered HTTP {response.status_code} {error}: {detail}")
        try:
            return json.loads(response.content)
        except ValueError as exc:
            raise MalformedAnswer(
                f"the model's answer is not JSON: {response.text[:200]!r}"
            ) from exc


class CloudClient:
    def __init__(
        self,
        base_url: str,
        *,
        timeout: float,
        retries: int,
        backoff: float,
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._http = httpx.Client(
            base_url=base_url, timeout=timeout, transport=transport, verify=tls_context()
        )
        self._retries = retries
        self._backoff = backoff
        self._sleep = sleep

    def close(self) -> None:
        self._http.close()

    def call(self, tool: Tool, args: dict[str, Any], *, key: str, generation: int) -> CallResult:
        """Send one tool call; re-send under the same key after a 5xx or a timeout."""
        headers = {KEY_HEADER: key, GENERATION_HEADER: str(generation)}
        problem = ""
        for attempt in range(self._retries + 1):
            if attempt:
                delay = self._backoff * 2 ** (attempt - 1)
                log.info("resending key=%s attempt=%d after=%r", key, attempt + 1, problem)
                self._sleep(delay)
            try:
                response = self._http.post(tool.path, json=args, headers=headers)
            except httpx.TransportError as exc:  # includes timeouts: the remote may have acted
                problem = f"{type(exc).__name__}: {exc}"
                continue
            if response.status_code in (200, 201):
                return self._parse(response, key)
            error, detail = _error_of(response)
            if response.status_code >= 500:
                problem = f"HTTP {response.status_code} {error}"
                continue
            if error == "stale_generation":
                raise StaleGeneration(
                    f"the cloud refused key={key} from generation {generation}: {detail}"
                )
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
