"""Running one life of the subject: the loop both isolation modes share.

``live`` builds the subject with ``make_agent(ctx)``, feeds it every input from the first one,
tears it down, and writes down how the life ended in a ``Life``. The in-process runner
(``_watchdog``) calls it on a thread of its own; the process runner (``_forked``) calls it
inside a forked child whose context ends the process with ``os._exit`` at the crash point.

Teardown: when ``make_agent`` returns a context manager, the subject is what its
``__enter__`` returns (the manager itself when that is ``None``) and its ``__exit__`` runs
when the start ends, with the crash or the error as its exception; otherwise a ``close()``
method of the subject runs. A start that really dies (process mode) runs neither.
"""

from __future__ import annotations

import threading
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from crashresume._context import Context, ScenarioLog, running
from crashresume._errors import CrashResumeError, SimulatedCrash, UsageError
from crashresume._faults import Fault
from crashresume._scenarios import Point

Factory = Callable[[Context], Any]
Teardown = Callable[[BaseException | None], None]


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
    timed_out: str | None = None  # how the harness stopped a start that ran out of time
    stepping: int = -1  # timed out lives: index of the input being stepped (-1: make_agent)
    notes: tuple[str, ...] = ()  # worth reporting, not findings (a teardown that raised, ...)

    @property
    def completed(self) -> bool:
        """The life fed every input without dying, raising or hanging."""
        return self.crash_step is None and self.error is None and self.timed_out is None


@dataclass(frozen=True, slots=True, kw_only=True)
class LifeSpec:
    """One start to run: which scenario, where it dies, and what it is for."""

    run_id: str
    log: ScenarioLog
    crash: Point | None
    restart: bool  # not the scenario's first start: ask state() before the first step
    baseline: bool  # a crash-free baseline: record state() after every step
    fault: Fault | None = None  # a fault scenario's first start: the fault it meets


class Runner(Protocol):
    """Runs one life of a scenario at a time (the in-process mode)."""

    mode: str

    def life(self, factory: Factory, inputs: Sequence[Any], spec: LifeSpec) -> Life: ...


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


class Holder:
    """The teardown of one start, handed out once: to the start itself, or to the watchdog."""

    __slots__ = ("_lock", "_teardown")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._teardown: Teardown | None = None

    def put(self, teardown: Teardown | None) -> None:
        with self._lock:
            self._teardown = teardown

    def take(self) -> Teardown | None:
        with self._lock:
            teardown, self._teardown = self._teardown, None
            return teardown


def _open(made: Any) -> tuple[Any, Teardown | None]:
    """The subject ``make_agent`` returned, and how to tear it down."""
    kind = type(made)
    if callable(getattr(kind, "__enter__", None)) and callable(getattr(kind, "__exit__", None)):
        entered = made.__enter__()
        subject = made if entered is None else entered

        def leave(exc: BaseException | None) -> None:
            if exc is None:
                made.__exit__(None, None, None)
            else:
                made.__exit__(type(exc), exc, exc.__traceback__)

        return subject, leave
    close = getattr(made, "close", None)
    if callable(close):
        return made, lambda exc: close()
    return made, None


def _parts(subject: Any) -> tuple[Callable[[Any], Any], Callable[[], Any] | None]:
    step = getattr(subject, "step", None)
    if not callable(step):
        raise UsageError(
            f"make_agent returned {type(subject).__name__!r}, which has no step(input) method. "
            "make_agent(ctx) must return the subject itself, e.g. `return MyAgent(ctx, store)`."
        )
    state = getattr(subject, "state", None)
    return step, state if callable(state) else None


def tear_down(teardown: Teardown | None, outcome: BaseException | None) -> str | None:
    """Run a teardown; a description of what it raised, or None."""
    if teardown is None:
        return None
    try:
        teardown(outcome)
    except SimulatedCrash:
        return None  # an effect call in close() of a dead start: it is dead already
    except Exception as exc:
        return describe_exception(exc)
    return None


def live(
    factory: Factory,
    inputs: Sequence[Any],
    ctx: Context,
    *,
    restart: bool,
    baseline: bool,
    on_start: Callable[[bool], None] | None = None,
    on_step: Callable[[int], None] | None = None,
    holder: Holder | None = None,
) -> Life:
    """Start the subject through ``factory`` and feed it ``inputs`` until it ends or dies."""
    life = Life()
    died_here = False
    holder = Holder() if holder is None else holder
    outcome: BaseException | None = None
    with running(ctx):
        try:
            ctx.enter_subject()
            try:
                subject, teardown = _open(factory(ctx))
                holder.put(teardown)
                step, state = _parts(subject)
                life.has_state = state is not None
                if restart and state is not None and not ctx._dead:
                    life.start_empty = is_empty(state())
                    if on_start is not None:
                        on_start(life.start_empty)
                nonempty: list[bool] | None = [] if baseline else None
                life.nonempty = nonempty
                for index, item in enumerate(inputs):
                    if ctx._dead:
                        break  # died on another thread: a dead process steps nothing more
                    ctx._step = index
                    if on_step is not None:
                        on_step(index)
                    step(item)
                    if nonempty is not None and state is not None:
                        nonempty.append(not is_empty(state()))
                if state is not None and not ctx._dead:
                    life.final_state = state()
            finally:
                ctx.leave_subject()
        except SimulatedCrash as exc:
            died_here = True
            outcome = exc
        except CrashResumeError as exc:
            outcome = exc
            raise
        except Exception as exc:
            outcome = exc
            if not ctx._dead:
                life.error = describe_exception(exc)
        finally:
            if not ctx._dead:
                ctx._settle()
            failed = tear_down(holder.take(), outcome)
            outcome = None  # the traceback holds the subject: let it go with this frame
            if failed is not None:
                if ctx._dead or life.error is not None:
                    life.notes = (f"{ctx.run_id}: close() after the crash raised: {failed}",)
                else:
                    life.error = f"close() raised: {failed}"
    life.calls = ctx._calls
    if ctx._dead:
        life.crash_step = ctx._crash_step
        # Only the thread the crash hit can have caught it; elsewhere it is the start's death.
        here = ctx._crash_thread is threading.current_thread()
        life.swallowed = here and not died_here
        life.final_state = None
    return life
