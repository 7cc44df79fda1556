"""Reach the mocks without sockets: synchronous httpx transports over the cores.

    cloud = Cloud(tmp_path / "cloud.sqlite3")
    client = httpx.Client(transport=cloud_transport(cloud), base_url="http://cloud")

The transports run the same `Router.dispatch` the FastAPI apps run, in the
calling thread, so the HTTP contract is byte-for-byte the standalone one.

Time, in-process:
- the `drop_after` knob (cloud, support) acts, commits, then raises `httpx.ReadTimeout`
  at once (no sleeping);
- a latency knob sleeps for real while it fits in the request's read timeout;
  when it would not, nothing sleeps: the remote still does its work (as a real
  server would after the client gave up) and the client gets `httpx.ReadTimeout`.

Transport-level faults (the network, not the remote) come from wrapping any
transport in `FaultTransport`, or from respx (see tests/test_mock_cloud_faults.py).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from typing import Literal

import httpx

from mock_remotes._wire import Call, Router
from mock_remotes.cloudcore import Cloud
from mock_remotes.cloudroutes import cloud_router
from mock_remotes.modelcore import Model
from mock_remotes.modelroutes import model_router
from mock_remotes.supportcore import Support
from mock_remotes.supportroutes import support_router

__all__ = [
    "FaultTransport",
    "RouterTransport",
    "TransportFault",
    "cloud_transport",
    "model_transport",
    "support_transport",
]

logger = logging.getLogger(__name__)

TransportFault = Literal["connect_error", "read_timeout"]


class _Clock:
    """Spends a request's waiting time, up to its read timeout (None: no limit)."""

    def __init__(self, budget: float | None) -> None:
        self.budget = budget
        self.spent = 0.0
        self.overran = False

    def wait(self, seconds: float) -> None:
        if seconds <= 0:
            return
        self.spent += seconds
        if self.budget is not None and self.spent > self.budget:
            self.overran = True  # the client would have given up by now: don't sleep
            return
        time.sleep(seconds)


def _read_timeout(request: httpx.Request) -> float | None:
    timeout = request.extensions.get("timeout", {})
    read = timeout.get("read") if isinstance(timeout, dict) else None
    return float(read) if isinstance(read, int | float) else None


class RouterTransport(httpx.BaseTransport):
    """An httpx transport answering from a mock's route table, in the caller's thread."""

    def __init__(self, router: Router, *, name: str = "mock") -> None:
        self.router = router
        self.name = name

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        clock = _Clock(_read_timeout(request))
        url = request.url
        call = Call(
            method=request.method,
            path=url.path,
            query=dict(url.params) if url.query else {},
            headers={
                name.decode("latin-1").lower(): value.decode("latin-1")
                for name, value in request.headers.raw
            },
            body=request.read(),
            wait=clock.wait,
        )
        reply = self.router.dispatch(call)
        if reply.hold is not None:
            raise httpx.ReadTimeout(
                f"{self.name} acted on {request.method} {request.url.path}, "
                "then dropped the answer (drop_after knob)",
                request=request,
            )
        if clock.overran:
            raise httpx.ReadTimeout(
                f"{self.name} needed {clock.spent:.3f}s for {request.method} "
                f"{request.url.path}; the read timeout is {clock.budget}s",
                request=request,
            )
        return httpx.Response(
            reply.status,
            headers=[("content-type", reply.media_type)],
            content=reply.content,
            request=request,
        )


def cloud_transport(cloud: Cloud) -> httpx.BaseTransport:
    """A socket-free transport serving `cloud` (use any base_url, e.g. http://cloud)."""
    return RouterTransport(cloud_router(cloud), name="mock cloud")


def model_transport(model: Model) -> httpx.BaseTransport:
    """A socket-free transport serving `model` (use any base_url, e.g. http://model)."""
    return RouterTransport(model_router(model), name="mock model")


def support_transport(support: Support) -> httpx.BaseTransport:
    """A socket-free transport serving `support` (use any base_url, e.g. http://support)."""
    return RouterTransport(support_router(support), name="mock support")


class FaultTransport(httpx.BaseTransport):
    """Wraps a transport and breaks chosen requests on purpose, in order.

    - `"connect_error"`: `httpx.ConnectError`; the request never reaches the remote.
    - `"read_timeout"`: the remote gets the request and acts, then the client
      sees `httpx.ReadTimeout` -- the after_call window, seen from the network.

    `inject(fault, times=n, path="/v1/servers")` queues a fault for the next `n`
    requests (whose path starts with `path`, if given); other requests pass.
    """

    def __init__(self, inner: httpx.BaseTransport) -> None:
        self.inner = inner
        self._lock = threading.Lock()
        self._queue: deque[tuple[TransportFault, str | None]] = deque()
        self.injected: list[tuple[TransportFault, str]] = []  # (fault, "METHOD path") served

    def inject(
        self, fault: TransportFault, *, times: int = 1, path: str | None = None
    ) -> FaultTransport:
        if fault not in ("connect_error", "read_timeout"):
            raise ValueError(f"unknown fault {fault!r}; use 'connect_error' or 'read_timeout'")
        with self._lock:
            self._queue.extend([(fault, path)] * times)
        return self

    @property
    def pending(self) -> int:
        with self._lock:
            return len(self._queue)

    def _take(self, request: httpx.Request) -> TransportFault | None:
        with self._lock:
            for entry in self._queue:
                fault, prefix = entry
                if prefix is None or request.url.path.startswith(prefix):
                    self._queue.remove(entry)
                    self.injected.append((fault, f"{request.method} {request.url.path}"))
                    return fault
        return None

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        fault = self._take(request)
        if fault == "connect_error":
            logger.info("injected connect error %s %s", request.method, request.url.path)
            raise httpx.ConnectError("injected: connection refused", request=request)
        response = self.inner.handle_request(request)
        if fault == "read_timeout":
            response.close()
            logger.info("injected read timeout %s %s", request.method, request.url.path)
            raise httpx.ReadTimeout(
                "injected: the remote acted, the answer was lost", request=request
            )
        return response

    def close(self) -> None:
        self.inner.close()
