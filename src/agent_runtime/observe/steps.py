"""The hooks the loop wraps its work in: a step (a span, and its time in the step
histogram) and a model call (its time), each a no-op when neither traces nor metrics are
on."""

from __future__ import annotations

import time
from types import TracebackType

from agent_runtime.observe import metrics, tracing
from agent_runtime.store.records import Lease


class Step:
    """One step of a run that does work (decide, act, or finish); a step the journal
    already confirmed, replayed on a restart, is neither a span nor a time."""

    __slots__ = ("_span", "_start")

    def __init__(self, lease: Lease, seq: int, *, replayed: bool = False) -> None:
        self._span = (
            tracing.NO_SPAN
            if replayed
            else tracing.span("step", lease.run_id, seq, generation=lease.generation)
        )
        self._start = 0.0 if replayed or not metrics.enabled() else time.perf_counter()

    def __enter__(self) -> Step:
        self._span.__enter__()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._span.__exit__(kind, exc, tb)
        if self._start and kind is None:  # a step that ended in an error is not a time
            metrics.observe_step(time.perf_counter() - self._start)


class ModelCall:
    """The time of one model call that answered (retries included)."""

    __slots__ = ("_start",)

    def __enter__(self) -> ModelCall:
        self._start = time.perf_counter() if metrics.enabled() else 0.0
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._start and kind is None:
            metrics.observe_model_call(time.perf_counter() - self._start)
