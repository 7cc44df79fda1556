"""The context a subject records its side effects through, and the crash it injects.

One ``ScenarioLog`` stands for the outside world of one scenario: the effects that really
happened, and an idempotent remote that remembers the first result of every key. Every life
of the scenario gets a fresh ``Context`` over the same log, so a resumed life sees what its
dead predecessor did to the world and nothing of its memory.

Which context is current: the one bound to the calling thread's ``contextvars`` context (the
thread the harness runs the start on, and anything that copies its context: asyncio tasks,
LangGraph's executor), else the start running in this process right now, whatever thread
asks (threads the subject or a framework started for it). Between starts and outside
``conform`` there is none.

``Context.effect`` is the hot path of the harness (a run over n inputs makes O(n^2) calls),
so it does the least it can: a lock, one counter, two integer comparisons, and a list append
or a dict lookup. The lock makes effects from several threads of one start safe: one effect
is recorded at a time, as an idempotent remote serialises the requests for one key.
"""

from __future__ import annotations

import contextvars
import ctypes
import threading
from collections.abc import Awaitable, Callable, Hashable, Iterator
from contextlib import contextmanager
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
_RUNNING: Context | None = None  # the start running in this process, seen from every thread


def _set_async_exc(thread: int, exc: type[BaseException]) -> None:
    """Raise ``exc`` in ``thread`` at its next bytecode.

    Never call it with NULL to cancel: CPython then leaves its eval breaker set and every
    later bytecode takes the slow path.
    """
    setter = getattr(getattr(ctypes, "pythonapi", None), "PyThreadState_SetAsyncExc", None)
    if setter is not None:  # CPython; elsewhere the start's thread just keeps running
        setter(ctypes.c_ulong(thread), ctypes.py_object(exc))


def current_context() -> Context | None:
    """The context of the start running right now, or ``None`` outside one.

    Any thread gets it: the thread the start runs on, threads the subject starts, and threads
    a framework starts for it. This is the extension point for adapters: code deep inside
    another library (a tool wrapper, an HTTP transport) can route its side effect through
    the harness without being handed ``ctx``::

        ctx = current_context()
        if ctx is None:
            return send(request)  # not under the harness: the real thing
        return ctx.effect("http.post", request.body, key=request.key, perform=lambda: send(request))
    """
    bound = _CURRENT.get()
    return bound if bound is not None else _RUNNING


@contextmanager
def running(ctx: Context) -> Iterator[None]:
    """Make ``ctx`` the current context: bound to this thread, and the process's running start."""
    global _RUNNING
    token = _CURRENT.set(ctx)
    _RUNNING = ctx
    try:
        yield
    finally:
        stop_running(ctx)
        _CURRENT.reset(token)


def resume_running(ctx: Context) -> None:
    """``ctx`` is the process's running start again: an overlap scenario's start, woken."""
    global _RUNNING
    _RUNNING = ctx


def stop_running(ctx: Context) -> None:
    """``ctx`` is no longer the process's running start (a no-op when a newer start is)."""
    global _RUNNING
    if _RUNNING is ctx:
        _RUNNING = None


class ScenarioLog:
    """The outside world of one scenario, shared by all its lives."""

    __slots__ = ("conflicts", "performed", "remote")

    def __init__(self) -> None:
        self.performed: list[Effect] = []  # every effect that really happened, in order
        self.remote: dict[Hashable, Receipt] = {}  # key -> first receipt under that key
        self.conflicts: list[Conflict] = []  # keys reused with another name or arg

    def snapshot(self) -> ScenarioLog:
        """A copy that a thread the harness abandoned can no longer append to."""
        copy = ScenarioLog()
        copy.performed = list(self.performed)
        copy.remote = dict(self.remote)
        copy.conflicts = list(self.conflicts)
        return copy


class Context:
    """Handed to ``make_agent(ctx)``; the subject records each side effect with ``effect``.

    ``run_id`` names the scenario: ``"run"`` for the baseline, ``"run-<k>"`` for the scenario
    that dies right after effect call k (its resume sees the same id). Key durable state by it.
    """

    __slots__ = (
        "_calls",
        "_conflicts",
        "_crash_step",
        "_crash_thread",
        "_dead",
        "_die_after",
        "_die_before",
        "_fault",
        "_forked",
        "_in_subject",
        "_lock",
        "_on_death",
        "_performed",
        "_remote",
        "_start_thread",
        "_step",
        "_subject_lock",
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
        self._dead = False  # died at its crash point, or was stopped by the harness
        self._step = -1  # index of the input being stepped; -1 while make_agent runs
        self._crash_step = -1  # the value of _step when the crash hit
        self._crash_thread: threading.Thread | None = None  # the thread the crash hit
        self._on_death: Callable[[], None] | None = None  # the in-process watchdog's bell
        self._lock = threading.RLock()
        self._start_thread: int | None = None  # ident of the thread running the start
        self._in_subject = False  # that thread is inside the subject's code right now
        self._subject_lock = threading.Lock()
        self._forked = False  # process mode: every new effect is sent to the parent
        self._fault: Any = None  # a fault scenario's armed fault (see _faults)

    def __repr__(self) -> str:
        return f"<crashresume.Context run_id={self.run_id!r} calls={self._calls}>"

    @property
    def crashed(self) -> bool:
        """This start has died (at its crash point, on any thread, or stopped by a timeout).

        An adapter that waits for work on another thread checks it, so that the wait ends
        when the start dies instead of hanging: ``if ctx.crashed: raise SimulatedCrash(...)``.
        """
        return self._dead

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
        # The steps of _enter and _record, inlined: this is the hot path.
        with self._lock:
            if self._dead:
                self._crash(self._calls, before=True)
            calls = self._calls = self._calls + 1
            if calls == self._die_before:
                self._crash(calls, before=True)
            if key is not None:
                try:
                    first = self._remote.get(key)
                except TypeError as exc:
                    raise UsageError(
                        f"effect key {key!r} is not hashable; use a string such as "
                        f"f'{name}:{{job_id}}'"
                    ) from exc
                if first is not None:
                    if first[1] != arg or first[0] != name:
                        self._conflict((key, first[0], first[1], name, arg))
                    if calls == self._die_after:
                        self._crash(calls, before=False)
                    return first[2]
            performed = self._performed
            result = f"{name}#{len(performed) + 1}" if perform is None else perform()
            performed.append((name, arg))
            if key is not None:
                self._remote[key] = (name, arg, result)
            if self._forked:
                self._sent(name, arg, key, result)
            if calls == self._die_after or self._dead:
                self._crash(calls, before=False)
            return result

    async def effect_async(
        self,
        name: str,
        arg: Any,
        key: Hashable | None = None,
        *,
        perform: Callable[[], Awaitable[Any]],
    ) -> Any:
        """``effect`` for async adapters: ``await perform()`` does the real work.

        The crash points are the same: right before the effect (nothing sent) and right after
        it was recorded. While ``perform`` is awaited other tasks may record effects.
        """
        with self._lock:
            calls, first = self._enter(name, arg, key)
        if first is not None:
            return first[2]
        result = await perform()
        with self._lock:
            self._record(calls, name, arg, key, result)
        return result

    def _enter(self, name: str, arg: Any, key: Hashable | None) -> tuple[int, Receipt | None]:
        """Count the call, die before it if planned, and look its key up at the remote."""
        if self._dead:
            self._crash(self._calls, before=True)
        calls = self._calls = self._calls + 1
        if calls == self._die_before:
            self._crash(calls, before=True)
        if key is None:
            return calls, None
        try:
            first = self._remote.get(key)
        except TypeError as exc:
            raise UsageError(
                f"effect key {key!r} is not hashable; use a string such as f'{name}:{{job_id}}'"
            ) from exc
        if first is not None:
            if first[1] != arg or first[0] != name:
                self._conflict((key, first[0], first[1], name, arg))
            if calls == self._die_after:
                self._crash(calls, before=False)
        return calls, first

    def _record(self, calls: int, name: str, arg: Any, key: Hashable | None, result: Any) -> None:
        """A new effect happened: write it down, then die right after it if planned."""
        self._performed.append((name, arg))
        if key is not None:
            self._remote[key] = (name, arg, result)
        if self._forked:
            self._sent(name, arg, key, result)
        if calls == self._die_after or self._dead:
            self._crash(calls, before=False)

    def _conflict(self, conflict: Conflict) -> None:
        self._conflicts.append(conflict)

    def _sent(self, name: str, arg: Any, key: Hashable | None, result: Any) -> None:
        """Hook: process mode tells the parent about every new effect here."""

    def _settle(self) -> None:
        """Hook: the start is ending; a faulted request still in flight lands (``_faults``)."""

    def _crash(self, calls: int, *, before: bool) -> NoReturn:
        """Die here. Stays dead: any later effect call of this life, on any thread, dies too."""
        if not self._dead:
            self._mark_dead()
        edge = "before" if before else "after"
        raise SimulatedCrash(
            f"crashresume: simulated crash {edge} effect call {calls} of {self.run_id}; "
            "this is the harness killing the process, do not catch it"
        )

    def _mark_dead(self) -> None:
        self._dead = True
        self._crash_step = self._step
        self._crash_thread = threading.current_thread()
        if threading.get_ident() != self._start_thread:
            self._interrupt_start()
        bell = self._on_death
        if bell is not None:
            bell()

    def enter_subject(self) -> None:
        """The start's thread is about to run the subject's code (in-process only)."""
        self._start_thread = threading.get_ident()
        self._in_subject = True

    def leave_subject(self) -> None:
        """The start's thread is back in the harness: no crash may be sent to it from now on.

        One sent just before is delivered at the thread's next bytecode, which is still inside
        the harness's ``except SimulatedCrash`` (see ``live``).
        """
        with self._subject_lock:
            self._in_subject = False

    @contextmanager
    def crash_aware(self) -> Iterator[None]:
        """A block of adapter code that checks ``crashed`` itself: while it runs, a crash on
        another thread is not delivered into it (an asynchronous exception landing inside a
        database driver can leave a connection half-used). Raise ``SimulatedCrash`` when
        ``crashed`` turns true."""
        with self._subject_lock:
            was, self._in_subject = self._in_subject, False
        try:
            yield
        finally:
            with self._subject_lock:
                self._in_subject = was
        if self._dead and was and threading.get_ident() == self._start_thread:
            raise SimulatedCrash(f"crashresume: {self.run_id} died on another thread")

    def _interrupt_start(self) -> None:
        """A crash on another thread ends the start's own thread too, at its next bytecode.

        A killed process stops every thread at once; in-process the nearest thing is an
        asynchronous ``SimulatedCrash`` in the thread running the subject (CPython's
        ``PyThreadState_SetAsyncExc``). It only lands while that thread is inside the
        subject's code; one blocked in a C call gets it when the call returns.
        """
        with self._subject_lock:
            if self._in_subject and self._start_thread is not None:
                _set_async_exc(self._start_thread, SimulatedCrash)

    def _stop(self) -> None:
        """The harness gave up on this start (a timeout): every later effect call dies."""
        self._dead = True
