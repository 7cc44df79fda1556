"""The context a subject records its side effects through, and the crash it injects.

One ``ScenarioLog`` stands for the outside world of one scenario: the effects that really
happened, and an idempotent remote that remembers the first result of every key. Every life
of the scenario gets a fresh ``Context`` over the same log, so a resumed life sees what its
dead predecessor did to the world and nothing of its memory.

``Context.effect`` is the hot path of the harness (a run over n inputs makes O(n^2) calls),
so it does the least it can: one counter, two integer comparisons, and a list append or a
dict lookup.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable, Hashable
from typing import Any, NoReturn

from crashresume._errors import SimulatedCrash, UsageError
from crashresume._scenarios import Point

# (name, arg): one logical effect, as the comparison with the baseline counts it.
Effect = tuple[str, Any]
# (name, arg, result): what the idempotent remote keeps for a key.
Receipt = tuple[str, Any, Any]
# (key, first name, first arg, name, arg): a key sent again with something else.
Conflict = tuple[Hashable, str, Any, str, Any]

_CURRENT: contextvars.ContextVar[Context | None] = contextvars.ContextVar(
    "crashresume_context", default=None
)


def current_context() -> Context | None:
    """The context of the life running right now in this thread, or ``None`` outside one.

    This is the extension point for adapters: code deep inside another library (a tool
    wrapper, an HTTP transport) can route its side effect through the harness without being
    handed ``ctx``::

        ctx = current_context()
        if ctx is None:
            return send(request)  # not under the harness: the real thing
        return ctx.effect("http.post", request.body, key=request.key, perform=lambda: send(request))
    """
    return _CURRENT.get()


class ScenarioLog:
    """The outside world of one scenario, shared by all its lives."""

    __slots__ = ("conflicts", "performed", "remote")

    def __init__(self) -> None:
        self.performed: list[Effect] = []  # every effect that really happened, in order
        self.remote: dict[Hashable, Receipt] = {}  # key -> first receipt under that key
        self.conflicts: list[Conflict] = []  # keys reused with another name or arg


class Context:
    """Handed to ``make_agent(ctx)``; the subject records each side effect with ``effect``.

    ``run_id`` names the scenario: ``"run"`` for the baseline, ``"run-<k>"`` for the scenario
    that dies right after effect call k (its resume sees the same id). Key durable state by it.
    """

    __slots__ = (
        "_calls",
        "_conflicts",
        "_crash_step",
        "_dead",
        "_die_after",
        "_die_before",
        "_performed",
        "_remote",
        "_step",
        "run_id",
    )

    def __init__(self, run_id: str, log: ScenarioLog, crash: Point | None = None) -> None:
        self.run_id = run_id
        self._performed = log.performed
        self._remote = log.remote
        self._conflicts = log.conflicts
        self._calls = 0  # effect calls made by this life
        # Call numbers start at 1, so 0 means "never".
        self._die_before = crash.call if crash is not None and crash.before else 0
        self._die_after = crash.call if crash is not None and not crash.before else 0
        self._dead = False
        self._step = -1  # index of the input being stepped; -1 while make_agent runs
        self._crash_step = -1  # the value of _step when the crash hit

    def __repr__(self) -> str:
        return f"<crashresume.Context run_id={self.run_id!r} calls={self._calls}>"

    def effect(
        self,
        name: str,
        arg: Any,
        key: Hashable | None = None,
        *,
        perform: Callable[[], Any] | None = None,
    ) -> Any:
        """Record one side effect and return its result.

        Without a key every call is a new effect. With a key the call behaves like an
        idempotent remote: the first call under a key performs the effect, later calls under
        the same key return the first result and are not new effects (a different ``name`` or
        ``arg`` under a known key is reported as ``key_conflict``).

        The result is ``perform()`` when given (an adapter doing the real work), otherwise an
        opaque receipt string such as ``"charge#3"``. When ``perform`` raises, nothing is
        recorded and the exception reaches the caller.
        """
        calls = self._calls = self._calls + 1
        if calls == self._die_before:
            self._crash(calls, before=True)
        if key is not None:
            try:
                first = self._remote.get(key)
            except TypeError as exc:
                raise UsageError(
                    f"effect key {key!r} is not hashable; use a string such as f'{name}:{{job_id}}'"
                ) from exc
            if first is not None:
                if first[1] != arg or first[0] != name:
                    self._conflicts.append((key, first[0], first[1], name, arg))
                if calls == self._die_after:
                    self._crash(calls, before=False)
                return first[2]
        performed = self._performed
        result = f"{name}#{len(performed) + 1}" if perform is None else perform()
        performed.append((name, arg))
        if key is not None:
            self._remote[key] = (name, arg, result)
        if calls == self._die_after:
            self._crash(calls, before=False, key=key, result=result)
        return result

    def _crash(
        self, calls: int, *, before: bool, key: Hashable | None = None, result: Any = None
    ) -> NoReturn:
        """Die here. Stays dead: any later effect call of this life dies again."""
        if not self._dead:
            self._dead = True
            self._crash_step = self._step
        self._die_before = calls + 1
        edge = "before" if before else "after"
        raise SimulatedCrash(
            f"crashresume: simulated crash {edge} effect call {calls} of {self.run_id}; "
            "this is the harness killing the process, do not catch it"
        )


def bind(ctx: Context) -> contextvars.Token[Context | None]:
    """Make ``ctx`` what ``current_context()`` returns until ``unbind``."""
    return _CURRENT.set(ctx)


def unbind(token: contextvars.Token[Context | None]) -> None:
    _CURRENT.reset(token)
