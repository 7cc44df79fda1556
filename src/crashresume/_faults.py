"""Faults at an effect boundary: the answer lost, the request refused, the request late.

A death is not the only thing that sends an agent down its recovery path: a request times out
after the remote committed, a remote answers 5xx or 429, an answer arrives garbled. The
subject's *own* retry logic then runs, inside the same start. A fault scenario gives effect
call k of the first start one fault, and nothing else goes wrong:

    lost          the effect acts, its answer is lost: the caller gets a timeout
    fail          the effect fails before acting (a 5xx, a refused connection)
    slow          the request is still in flight when the caller times out; it lands later,
                  right before the start's next effect call, or when the start ends
    rate_limited  the remote refuses before acting: too many requests (a 429)
    malformed     the effect acts, its answer arrives garbled

The caller sees an ordinary exception, so generic retry code catches it::

    Exception
    └── InjectedFault           every injected fault; .fault names its kind
        ├── EffectTimeout       also a TimeoutError        (lost, slow)
        ├── EffectFailed        also a ConnectionError     (fail, rate_limited)
        └── MalformedAnswer     also a ValueError          (malformed)

Through ``crashresume.adapters.http`` they arrive as HTTP does: a read timeout, a 503, a 429
with ``Retry-After: 0``, a 200 whose JSON body is cut short. In async effects ``slow`` lands
at once (as ``lost``). Scenario ids: ``run-<fault>-<k>``, e.g. ``run-lost-2``.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass
from typing import Any

from crashresume._context import Context, ScenarioLog
from crashresume._errors import UsageError

FAULTS = ("lost", "fail", "slow", "rate_limited", "malformed")  # every kind, in plan order

_WHAT = {
    "lost": "the effect acted and its answer was lost (a timeout after the remote committed)",
    "fail": "the effect failed before acting (a 5xx or a refused connection)",
    "slow": "the request was still in flight when the caller timed out, and landed later",
    "rate_limited": "the remote refused it before acting (429 too many requests)",
    "malformed": "the effect acted and its answer arrived garbled",
}
_ID_PATTERN = re.compile(r"run-(" + "|".join(FAULTS) + r")-([1-9][0-9]*)")


class InjectedFault(Exception):
    """Raised by ``ctx.effect`` at the call a fault scenario (``faults=``) picked; ``fault``
    names its kind. The subject handles it as it would the real network error."""

    def __init__(self, message: str, *, fault: str) -> None:
        super().__init__(message)
        self.fault = fault


class EffectTimeout(InjectedFault, TimeoutError):
    """The caller gave up waiting (``lost``: the effect acted; ``slow``: it lands later)."""


class EffectFailed(InjectedFault, ConnectionError):
    """The effect did not act (``fail``: a 5xx or refused connection; ``rate_limited``)."""


class MalformedAnswer(InjectedFault, ValueError):
    """The effect acted, and its answer cannot be read."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Fault:
    """One fault: ``kind`` at effect call ``call`` of a scenario's first start."""

    kind: str
    call: int

    @property
    def sid(self) -> str:
        return f"run-{self.kind}-{self.call}"

    def describe(self) -> str:
        return f"at effect call {self.call} {_WHAT[self.kind]}"


def parse_fault_id(text: Any) -> Fault | None:
    """The fault a scenario id such as ``run-lost-2`` names, or None for any other id."""
    match = _ID_PATTERN.fullmatch(text) if isinstance(text, str) else None
    if match is None:
        return None
    return Fault(kind=match.group(1), call=int(match.group(2)))


def describe_fault_id(text: str) -> str | None:
    """Plain words for a fault scenario id, or None for any other id."""
    fault = parse_fault_id(text)
    return None if fault is None else f"the first run met a fault: {fault.describe()}"


class _Armed:
    """The fault of one start, and the request of a ``slow`` fault while it is in flight."""

    __slots__ = ("fault", "fired", "pending")

    def __init__(self, fault: Fault) -> None:
        self.fault = fault
        self.fired = False
        self.pending: tuple[str, Any, Hashable | None, Callable[[], Any] | None] | None = None


class _FaultEffects(Context):
    """``effect`` with one fault armed; every other call behaves as the base context's."""

    __slots__ = ()

    def _due(self) -> _Armed | None:
        armed: _Armed | None = self._fault
        if armed is None or armed.fired or self._calls + 1 != armed.fault.call:
            return None
        armed.fired = True
        return armed

    def _refuse(self, armed: _Armed) -> InjectedFault:
        """Count the faulted call, which does not act, and say what the caller sees."""
        if self._dead:
            self._crash(self._calls, before=True)
        self._calls += 1
        kind = armed.fault.kind
        message = f"crashresume: injected fault {kind!r} at effect call {self._calls}"
        if kind == "slow":
            message += ": timed out, the request is still in flight"
            return EffectTimeout(message, fault=kind)
        return EffectFailed(message + ": the remote did not act", fault=kind)

    def effect(
        self,
        name: str,
        arg: Any,
        key: Hashable | None = None,
        *,
        perform: Callable[[], Any] | None = None,
    ) -> Any:
        with self._lock:
            self._land()
            armed = self._due()
            if armed is None:
                return super().effect(name, arg, key, perform=perform)
            kind = armed.fault.kind
            if kind in ("fail", "rate_limited", "slow"):
                error = self._refuse(armed)
                if kind == "slow":
                    armed.pending = (name, arg, key, perform)
                raise error
            super().effect(name, arg, key, perform=perform)
            raise _acted(kind, self._calls)

    async def effect_async(
        self,
        name: str,
        arg: Any,
        key: Hashable | None = None,
        *,
        perform: Callable[[], Awaitable[Any]],
    ) -> Any:
        with self._lock:
            self._land()
            armed = self._due()
            if armed is not None and armed.fault.kind in ("fail", "rate_limited"):
                raise self._refuse(armed)
        if armed is None:
            return await super().effect_async(name, arg, key, perform=perform)
        await super().effect_async(name, arg, key, perform=perform)
        raise _acted("lost" if armed.fault.kind == "slow" else armed.fault.kind, self._calls)

    def _land(self) -> None:
        """A ``slow`` request in flight lands now; it is no effect call of the subject's."""
        armed: _Armed | None = self._fault
        if armed is None or armed.pending is None or self._dead:
            return
        name, arg, key, perform = armed.pending
        armed.pending = None
        calls = self._calls
        try:
            super().effect(name, arg, key, perform=perform)
        except Exception:  # the late request failed for real: nothing happened
            pass
        finally:
            self._calls = calls

    def _settle(self) -> None:
        with self._lock:
            self._land()


def _acted(kind: str, call: int) -> InjectedFault:
    message = f"crashresume: injected fault {kind!r} at effect call {call}"
    if kind == "malformed":
        return MalformedAnswer(message + ": the remote acted, its answer is garbled", fault=kind)
    return EffectTimeout(message + ": timed out, but the remote acted", fault=kind)


_CLASSES: dict[type[Context], type[Context]] = {}  # base context class -> with faults


def _with_faults(base: type[Context]) -> type[Context]:
    kind = _CLASSES.get(base)
    if kind is None:
        kind = _CLASSES[base] = type(
            f"Faulty{base.__name__}", (_FaultEffects, base), {"__slots__": ()}
        )
    return kind


def faultable(base: type[Context], run_id: str, log: ScenarioLog) -> Context:
    """A ``base`` context with no fault yet, which ``arm`` can give one later."""
    return _with_faults(base)(run_id, log, None)


def arm(ctx: Context, kind: str) -> None:
    """The next effect call of ``ctx`` (made by ``faultable``) meets fault ``kind``."""
    if kind not in FAULTS:
        raise UsageError(f"{kind!r} is not a fault kind; use one of {', '.join(map(repr, FAULTS))}")
    if not isinstance(ctx, _FaultEffects):
        raise UsageError("this context cannot take a fault: it was not made by faultable()")
    ctx._fault = _Armed(Fault(kind=kind, call=ctx._calls + 1))


def fault_met(ctx: Context) -> bool:
    """A fault was injected into this start (so an error it raises is the fault's doing)."""
    armed: _Armed | None = ctx._fault
    return armed is not None and armed.fired


def make_context(
    base: type[Context],
    run_id: str,
    log: ScenarioLog,
    crash: Any,
    fault: Fault | None,
    *extra: Any,
) -> Context:
    """A ``base`` context (``Context`` or process mode's) for one start, ``fault`` armed."""
    if fault is None:
        return base(run_id, log, crash, *extra)
    ctx = _with_faults(base)(run_id, log, crash, *extra)
    ctx._fault = _Armed(fault)
    return ctx
