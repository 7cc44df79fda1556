"""OpenTelemetry traces: each run is a trace, each step a span, and the phases of a step
(``decide``, ``intent``, ``call``, ``confirm``) its children.

A run outlives its processes, so its trace cannot be a span that some process opens and
closes: the trace id is derived from the run id (:func:`trace_id_of`), and every span of
the run whose parent is not already one of its own hangs from a root that no process
owns, a remote parent with an id derived the same way. A worker that resumes a run after a
crash therefore adds its spans to the same trace, under the same root, without reading
anything back. Spans carry ``agent_runtime.run_id`` and ``agent_runtime.seq``; the phases
also the idempotency key, the effect contract and the remote status as they are known;
``agent_runtime.generation`` tells the lives apart.

The API (``opentelemetry-api``, the ``otel`` extra) is imported once, here; without it
:func:`span` returns one shared no-op object, so a hook costs a function call. With it
and no SDK configured, the API's own no-op tracer answers. What exports the spans is the
application's choice (an SDK ``TracerProvider`` with its processors): a process that
dies by ``os._exit`` (a crash point) loses what a batching processor had not sent yet.
"""

from __future__ import annotations

import hashlib
from functools import lru_cache
from types import TracebackType
from typing import TYPE_CHECKING, Any

try:  # the one guarded import: everything below checks _api
    from opentelemetry import trace as _api
except ImportError:  # pragma: no cover - the otel extra is absent
    _api = None  # type: ignore[assignment]

if TYPE_CHECKING:
    from opentelemetry.context import Context
    from opentelemetry.trace import Span as OtelSpan
    from opentelemetry.trace import TracerProvider

TRACER = "agent_runtime"
PREFIX = "agent_runtime."  # of every attribute name
# The TracerProvider spans go to; None: the global one (opentelemetry.trace's). A seam for
# an application (or a test) that keeps its provider to itself.
provider: TracerProvider | None = None


def trace_id_of(run_id: str) -> int:
    """The run's 128-bit trace id: the same in every process, never 0."""
    return _ids(run_id)[0]


@lru_cache(maxsize=1024)
def _ids(run_id: str) -> tuple[int, int]:
    digest = hashlib.sha256(f"agent_runtime run {run_id}".encode()).digest()
    trace_id = int.from_bytes(digest[:16], "big") or 1
    root_id = int.from_bytes(digest[16:24], "big") or 1
    return trace_id, root_id


def _root(run_id: str) -> Context:
    """The context of the run's root: a sampled remote parent no process owns."""
    assert _api is not None
    trace_id, root_id = _ids(run_id)
    parent = _api.SpanContext(
        trace_id=trace_id,
        span_id=root_id,
        is_remote=True,
        trace_flags=_api.TraceFlags(_api.TraceFlags.SAMPLED),
    )
    return _api.set_span_in_context(_api.NonRecordingSpan(parent))


class _NoSpan:
    """What :func:`span` returns without the API: enters, leaves, records nothing."""

    def __enter__(self) -> _NoSpan:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def set(self, name: str, value: Any) -> None:
        return None


NO_SPAN = _NoSpan()


class _Span:
    """One span of a run, current while entered; :meth:`set` adds an attribute."""

    __slots__ = ("_cm", "_span", "attributes", "name", "run_id")

    def __init__(self, name: str, run_id: str, attributes: dict[str, Any]) -> None:
        self.name = name
        self.run_id = run_id
        self.attributes = attributes
        self._span: OtelSpan | None = None

    def __enter__(self) -> _Span:
        assert _api is not None
        current = _api.get_current_span().get_span_context()
        mine = current.is_valid and current.trace_id == trace_id_of(self.run_id)
        tracer = provider.get_tracer(TRACER) if provider is not None else _api.get_tracer(TRACER)
        self._cm = tracer.start_as_current_span(
            self.name,
            context=None if mine else _root(self.run_id),
            attributes={PREFIX + k: v for k, v in self.attributes.items() if v is not None},
        )
        self._span = self._cm.__enter__()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._span is not None and exc is not None and not isinstance(exc, Exception):
            # a BaseException (an injected crash, an exit): the API records only errors
            self._span.set_status(
                _api.Status(_api.StatusCode.ERROR, f"{type(exc).__name__}: {exc}")
            )
        self._cm.__exit__(kind, exc, tb)

    def set(self, name: str, value: Any) -> None:
        if self._span is not None and value is not None:
            self._span.set_attribute(PREFIX + name, value)


def span(name: str, run_id: str, seq: int, **attributes: Any) -> _Span | _NoSpan:
    """A span ``name`` of the run's trace (a child of the span of that run that is
    current, else of the run's root), with ``run_id``, ``seq`` and ``attributes`` (None
    values left out); :data:`NO_SPAN` without the API."""
    if _api is None:
        return NO_SPAN
    return _Span(name, run_id, {"run_id": run_id, "seq": seq, **attributes})
