"""A worker's waits: where the schedule can act while a worker sleeps, and the backoff oracle.

The runtime hands one ``sleep`` to everything of a worker that waits: the tool's backoff
between two attempts of a call (``Actor._attempts``), a tool client's wait before it
sends again (``OwnedWait``, which checks the lease once the wait is over), the wait for
an earlier attempt to land, the model client's retries. The suite never really sleeps
(the database clock is frozen: real time would prove nothing), so a wait used to be a
no-op nobody saw: a wrong backoff, a retry without one, and a takeover or an operator's
cancel *during* a client's wait were all out of reach (gap class 15).

:class:`WaitSeam` is the ``sleep`` the suite's workers get instead, in both runners:

- it tells the waits apart by who called it (the caller's frame: the runtime keeps one
  seam for all of them, and the suite does not change the runtime to label them), and
  records each :class:`Wait` with its cause, run, step, generation and attempt;
- at a *retry wait* (a tool's backoff, or its client's wait before a re-send) it is a gate,
  :data:`WAIT_POINT`: a schedule may ``pause`` (or crash, stall) a worker there and let a
  restart, a sweep or an operator's cancel land before the wait is over;
- the wait for an earlier attempt of a ``checked`` call to land before its check
  (``Actor._await_landing``) is the same gate: a schedule may move the clock by part of
  the wait while the worker stands there, and :func:`landing_truth` holds the worker to
  its rule (wait again only if the clock moved at least half the last wait; otherwise
  release the run with ``CallInFlight``, never check early);
- it returns at once: the clock does not move by the wait (a schedule moves it).

The desk's tools note every attempt they make (:func:`attempted`, through the worker
thread's :class:`WaitLog`), and :func:`backoff_truth` holds the two together: the attempt
``n > 1`` of a call went out after exactly one backoff wait of that call, of
``delay(n - 1)`` under the tool's declared backoff (no jitter in the suite), and no other;
and never an attempt beyond the tool's declared retries (``range(1, retries + 3)``, one
attempt too many, passed the suite: 2026-12-06 full run).
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from types import FrameType
from typing import Any, Final

from agent_runtime.backoff import Backoff
from agent_runtime.loop.lease import OwnedWait

from .violations import Violation

WAIT_POINT: Final = "retry_wait"  # the gate of a retry wait (a tool's backoff, a client's)
BACKOFF: Final = "backoff"  # a tool's wait between two attempts of a call
CLIENT: Final = "client"  # a tool client's wait before it sends again (OwnedWait)
LANDING: Final = "landing"  # a checked call's wait for its earlier attempts to land
OTHER: Final = "other"  # any other wait (the model client's retries)
DEPTH: Final = 12  # frames a client's wait looks up for the attempt it belongs to


@dataclass(frozen=True, kw_only=True)
class Wait:
    """One wait a worker made, and why."""

    cause: str  # BACKOFF, CLIENT, LANDING or OTHER
    seconds: float
    caller: str  # the function that waited
    run: str = ""
    generation: int | None = None
    seq: int | None = None
    attempt: int | None = None  # the tool's attempt it comes before (BACKOFF), or is in
    tool: str = ""
    base: float | None = None  # the tool's declared backoff (BACKOFF)
    retries: int | None = None  # ... and its declared retries (BACKOFF)
    key: str = ""  # the call's key (LANDING)
    invocation: int = 0  # which landing wait of the worker's it is part of (LANDING)


@dataclass(frozen=True, kw_only=True)
class Attempt:
    """One attempt of a tool's call as the tool itself saw it (its ``Call``)."""

    run: str
    generation: int
    seq: int
    attempt: int
    tool: str


@dataclass(eq=False, kw_only=True)
class WaitLog:
    """A worker's waits and attempts, in order, and how far :func:`backoff_truth` judged."""

    waits: list[Wait] = field(default_factory=list)
    attempts: list[Attempt] = field(default_factory=list)
    judged_waits: int = 0
    judged_attempts: int = 0
    judged_landings: int = 0
    judged_release: bool = False


_bound = threading.local()  # the WaitLog of the worker whose thread this is


def bind(log: WaitLog | None) -> None:
    """The calling thread is a worker's: its tools' attempts go to ``log``."""
    _bound.log = log


def attempted(call: Any, tool: str) -> None:
    """A desk tool was entered for ``call`` (a ``Call``): noted on the worker's log."""
    log: WaitLog | None = getattr(_bound, "log", None)
    if log is not None:
        log.attempts.append(
            Attempt(
                run=call.run_id,
                generation=call.generation,
                seq=call.seq,
                attempt=call.attempt,
                tool=tool,
            )
        )


class WaitSeam:
    """The ``sleep`` of a suite's worker: records the wait, is a gate at a retry wait
    (``hook(WAIT_POINT, seq)``), and returns without sleeping."""

    def __init__(self, hook: Callable[[str, int], None], log: WaitLog | None = None) -> None:
        self._hook = hook
        self.log = log if log is not None else WaitLog()
        # the frame of the landing wait last seen, kept alive so that a later one is told
        # apart from it by identity (a finished frame's address may be reused)
        self._landing: FrameType | None = None
        self._landings = 0

    def __call__(self, seconds: float) -> None:
        frame = sys._getframe(1)
        wait = _wait_of(frame, seconds)
        if wait.cause == LANDING:
            if frame is not self._landing:
                self._landing, self._landings = frame, self._landings + 1
            wait = replace(wait, invocation=self._landings)
        self.log.waits.append(wait)
        if wait.cause != OTHER and wait.seq is not None:
            self._hook(WAIT_POINT, wait.seq)


def _wait_of(frame: FrameType, seconds: float) -> Wait:
    caller = frame.f_code.co_name
    local = frame.f_locals
    if caller == "_await_landing" and "call" in local and "lease" in local:
        lease, call = local["lease"], local["call"]
        return Wait(
            cause=LANDING,
            seconds=seconds,
            caller=caller,
            run=lease.run_id,
            generation=lease.generation,
            seq=call.seq,
            key=call.idem_key,
        )
    if caller == "_attempts" and "attempt" in local and "context" in local:
        context, tool = local["context"], local["tool"]
        return Wait(
            cause=BACKOFF,
            seconds=seconds,
            caller=caller,
            run=context.run_id,
            generation=context.generation,
            seq=context.seq,
            attempt=local["attempt"],
            tool=tool.name,
            base=tool.backoff,
            retries=tool.retries,
        )
    if isinstance(local.get("self"), OwnedWait):
        outer: FrameType | None = frame.f_back
        for _ in range(DEPTH):  # the tool's attempt this client's request belongs to
            if outer is None or outer.f_code.co_name == "_attempts":
                break
            outer = outer.f_back
        if outer is not None and outer.f_code.co_name == "_attempts":
            context, tool = outer.f_locals["context"], outer.f_locals["tool"]
            return Wait(
                cause=CLIENT,
                seconds=seconds,
                caller="OwnedWait",
                run=context.run_id,
                generation=context.generation,
                seq=context.seq,
                attempt=outer.f_locals["attempt"],
                tool=tool.name,
            )
    return Wait(cause=OTHER, seconds=seconds, caller=caller)


def expected_delay(base: float, attempt: int, cap: float) -> float:
    """The wait a tool of backoff ``base`` declares before ``attempt`` (2: its first retry),
    with the suite's jitter source (none: every wait its full length)."""
    return Backoff(base=base, cap=cap, rand=lambda: 0.0).delay(attempt - 1)


def backoff_truth(label: str, log: WaitLog, cap: float) -> list[Violation]:
    """The waits and attempts ``log`` gained since the last call, judged: a tool's attempt
    ``n > 1`` came after exactly one backoff wait of its call before attempt ``n``, of the
    declared ``delay(n - 1)``; a backoff wait came before an attempt beyond the first."""
    found: list[Violation] = []
    for wait in log.waits[log.judged_waits :]:
        if wait.cause != BACKOFF:
            continue
        assert wait.attempt is not None and wait.base is not None
        if wait.attempt < 2:
            found.append(
                Violation(
                    "backoff",
                    wait.run,
                    wait.seq,
                    f"{label} waited {wait.seconds}s before the first attempt of {wait.tool}: "
                    "a tool backs off only between two attempts",
                )
            )
            continue
        if wait.retries is not None and wait.attempt > wait.retries + 1:
            found.append(
                Violation(
                    "backoff",
                    wait.run,
                    wait.seq,
                    f"{label} backed off for attempt {wait.attempt} of {wait.tool}, which "
                    f"declares {wait.retries} retries: {wait.retries + 1} attempts at most",
                )
            )
            continue
        want = expected_delay(wait.base, wait.attempt, cap)
        if abs(wait.seconds - want) > 1e-9:
            found.append(
                Violation(
                    "backoff",
                    wait.run,
                    wait.seq,
                    f"{label} waited {wait.seconds}s before attempt {wait.attempt} of "
                    f"{wait.tool}, whose declared backoff ({wait.base}s, doubled per retry, "
                    f"cap {cap}s) is {want}s there",
                )
            )
    log.judged_waits = len(log.waits)
    for tried in log.attempts[log.judged_attempts :]:
        if tried.attempt < 2:
            continue
        waited = [
            w
            for w in log.waits
            if w.cause == BACKOFF and (w.run, w.generation, w.seq, w.attempt) == key(tried)
        ]
        if len(waited) != 1:
            found.append(
                Violation(
                    "backoff",
                    tried.run,
                    tried.seq,
                    f"{label} made attempt {tried.attempt} of {tried.tool} after "
                    f"{len(waited)} backoff waits for it (one is due: a retry backs off)",
                )
            )
    log.judged_attempts = len(log.attempts)
    return found


def key(tried: Attempt) -> tuple[str, int, int, int]:
    return (tried.run, tried.generation, tried.seq, tried.attempt)


def landing_truth(label: str, log: WaitLog, released: float | None) -> list[Violation]:
    """The landing waits ``log`` gained since the last call, and the worker's release of its
    run (``released``: its ``CallInFlight``'s ``retry_after``, None if it raised none),
    held to ``Actor._await_landing``'s rule with its own arithmetic: a landing wait is
    made only while one is due (more than 0 s); after a wait of ``s`` seconds the worker
    waits again, for the ``s'`` still due, only if the clock moved at least half of it
    (``s - s' >= s / 2``), and otherwise releases the run (a frozen or skewed clock:
    checked early, an attempt still in flight could land after the check). The suite's
    clock moves only by the schedule, so a schedule that ticks while a worker stands at
    a landing wait decides which it must be."""
    found: list[Violation] = []
    for i in range(log.judged_landings, len(log.waits)):
        wait = log.waits[i]
        if wait.cause != LANDING:
            continue
        if wait.seconds <= 0:
            found.append(
                Violation(
                    "landing",
                    wait.run,
                    wait.seq,
                    f"{label} waited {wait.seconds}s for {wait.key} to land: nothing was due",
                )
            )
        last = _landing_before(log, i)
        again = last is not None and last.invocation == wait.invocation
        if again and last is not None and last.seconds - wait.seconds < last.seconds / 2:
            found.append(
                Violation(
                    "landing",
                    wait.run,
                    wait.seq,
                    f"{label} waited again ({wait.seconds}s) for {wait.key} to land "
                    f"although the clock moved {last.seconds - wait.seconds:.3f}s of "
                    f"the {last.seconds}s it had waited, less than half: a frozen "
                    "clock releases the run (CallInFlight), never spins",
                )
            )
    log.judged_landings = len(log.waits)
    if released is not None and not log.judged_release:
        log.judged_release = True
        last = _landing_before(log, len(log.waits))
        if last is None:
            found.append(
                Violation(
                    "landing",
                    None,
                    None,
                    f"{label} released its run as in flight ({released}s) without having "
                    "waited for any attempt to land",
                )
            )
        elif not last.seconds - released < last.seconds / 2:
            found.append(
                Violation(
                    "landing",
                    last.run,
                    last.seq,
                    f"{label} released its run as in flight for {released}s more although "
                    f"the clock moved {last.seconds - released:.3f}s of the {last.seconds}s "
                    f"it waited for {last.key}: at least half, so it must wait the rest",
                )
            )
    return found


def _landing_before(log: WaitLog, end: int) -> Wait | None:
    return next((w for w in reversed(log.waits[:end]) if w.cause == LANDING), None)
