"""Running one life of the subject, and the in-process runner.

``live`` is the one loop both isolation modes use: build the subject with ``make_agent(ctx)``,
feed it every input from the first one, and write down how the life ended in a ``Life``.
The in-process runner calls it directly; the process runner (``_forked``) calls it inside a
forked child whose context ends the process with ``os._exit`` at the crash point.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from crashresume._context import Context, ScenarioLog, bind, unbind
from crashresume._errors import CrashResumeError, SimulatedCrash, UsageError
from crashresume._scenarios import Point

Factory = Callable[[Context], Any]


@dataclass(slots=True, kw_only=True)
class Life:
    """How one start of the subject ended."""

    calls: int = 0  # effect calls this life made (replays included)
    crash_step: int | None = None  # index of the input being stepped when it died; None: no crash
    error: str | None = None  # the exception the subject raised, as one line
    has_state: bool = False  # the subject has a state() method
    start_empty: bool | None = None  # state() was empty right after a restart (None: not asked)
    final_state: Any = None  # state() after the last input (completed lives only)
    nonempty: list[bool] | None = None  # baseline only: state() non-empty after each step
    swallowed: bool = False  # the subject caught the injected crash instead of dying

    @property
    def completed(self) -> bool:
        """The life fed every input without dying or raising."""
        return self.crash_step is None and self.error is None


class Runner(Protocol):
    """Runs one life of a scenario; one implementation per isolation mode."""

    mode: str

    def life(
        self,
        factory: Factory,
        inputs: Sequence[Any],
        run_id: str,
        log: ScenarioLog,
        crash: Point | None,
        *,
        restart: bool,
        baseline: bool,
    ) -> Life: ...


def is_empty(value: Any) -> bool:
    """``None`` and anything of length 0 count as empty state."""
    if value is None:
        return True
    try:
        return len(value) == 0
    except TypeError:
        return False


def describe_exception(exc: BaseException) -> str:
    """``Type: message (at file:line in function)`` for the innermost frame."""
    text = "".join(traceback.format_exception_only(exc)).strip()
    frames = traceback.extract_tb(exc.__traceback__)
    if frames:
        last = frames[-1]
        text += f" (at {last.filename}:{last.lineno} in {last.name})"
    return text


def _parts(subject: Any) -> tuple[Callable[[Any], Any], Callable[[], Any] | None]:
    step = getattr(subject, "step", None)
    if not callable(step):
        raise UsageError(
            f"make_agent returned {type(subject).__name__!r}, which has no step(input) method. "
            "make_agent(ctx) must return the subject itself, e.g. `return MyAgent(ctx, store)`."
        )
    state = getattr(subject, "state", None)
    return step, state if callable(state) else None


def live(
    factory: Factory,
    inputs: Sequence[Any],
    ctx: Context,
    *,
    restart: bool,
    baseline: bool,
    on_start: Callable[[bool], None] | None = None,
) -> Life:
    """Start the subject through ``factory`` and feed it ``inputs`` until it ends or dies."""
    life = Life()
    died_here = False
    token = bind(ctx)
    try:
        subject = factory(ctx)
        step, state = _parts(subject)
        life.has_state = state is not None
        if restart and state is not None:
            life.start_empty = is_empty(state())
            if on_start is not None:
                on_start(life.start_empty)
        if baseline:
            nonempty: list[bool] = []
            life.nonempty = nonempty
            for index, item in enumerate(inputs):
                ctx._step = index
                step(item)
                if state is not None:
                    nonempty.append(not is_empty(state()))
        else:
            for index, item in enumerate(inputs):
                ctx._step = index
                step(item)
        if state is not None and not ctx._dead:
            life.final_state = state()
    except SimulatedCrash:
        died_here = True
    except CrashResumeError:
        raise
    except Exception as exc:
        if not ctx._dead:
            life.error = describe_exception(exc)
    finally:
        unbind(token)
    life.calls = ctx._calls
    if ctx._dead:
        life.crash_step = ctx._crash_step
        life.swallowed = not died_here
        life.final_state = None
    return life


class InProcessRunner:
    """Every life in this process; the crash is a ``SimulatedCrash`` raised from ``effect``."""

    mode = "inprocess"

    def life(
        self,
        factory: Factory,
        inputs: Sequence[Any],
        run_id: str,
        log: ScenarioLog,
        crash: Point | None,
        *,
        restart: bool,
        baseline: bool,
    ) -> Life:
        ctx = Context(run_id, log, crash)
        return live(factory, inputs, ctx, restart=restart, baseline=baseline)
