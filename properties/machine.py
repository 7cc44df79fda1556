"""The Hypothesis state machine that generates crash schedules and shrinks failures.

Each rule turns its drawn arguments into one :class:`~properties.events.Event`
(picking among the runs it applies to, so no step is wasted), hands it to the
in-process runner, and records it. The invariants run after every rule; the
teardown drives every run to completion and compares it with the crash-free
baseline.

A failure is fast and saved. The first failing example is written to
``properties/failures/<name>-unshrunk-<digest>.json`` at once, before any shrinking, so
no timeout can hide it. Shrinking then runs within :data:`SHRINK_BUDGET` seconds: past
it, every further candidate passes at once, and Hypothesis ends with the shortest
failing schedule found so far, which its final replay saves as
``<name>-<digest>.json``; :func:`~properties.minimise.minimise` then deletes every event
it does not need, and saves over it. Every saved failure is printed with its violation,
seed, file and replay command.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar, Final

import hypothesis
from hypothesis import note
from hypothesis import strategies as st
from hypothesis.control import current_build_context
from hypothesis.internal.conjecture import engine
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
)

from .agents import DEFAULT_KIND, KINDS
from .disruption_rules import DisruptionRules
from .events import GATES, RUNS, Event, Schedule, program, run_id
from .operator_rules import OperatorRules
from .progress import Progress
from .runner import ScheduleRunner

FAILURES: Final = Path(__file__).resolve().parent / "failures"
SHRINK_BUDGET: Final = 10.0  # seconds Hypothesis may shrink; single deletions follow
PICK: Final = st.integers(0, RUNS - 1)  # which of the runs the rule applies to
SEQ: Final = st.sampled_from((None, 0, 1, 2, 3))  # a step, or whichever comes next
# where a worker may crash, pause or stall: every gate of a step, and a retry's backoff wait
POINT: Final = st.sampled_from(GATES)
# Clock moves around the thresholds that matter: the tool timeout (1 s), the lease (12 s)
# and record_decision's minute (a decision after it refreshes updated_at: ``activity``).
# A worker frozen through them is a stall shorter or longer than each.
TICKS: Final = st.sampled_from((2.0, 11.0, 13.0, 0.5, 61.0))
SWEEPS: Final = st.sampled_from((None, 11.0, 2.0, 0.0))  # None: one lease and a second


@contextlib.contextmanager
def shrinking_within(seconds: float) -> Iterator[None]:
    """Hypothesis stops shrinking after ``seconds`` (its own limit, five minutes by default,
    which its engine keeps as a module setting meant to be changed), then reports the
    shortest failing example found so far."""
    saved = engine.MAX_SHRINKING_SECONDS
    engine.MAX_SHRINKING_SECONDS = seconds  # type: ignore[assignment]
    try:
        yield
    finally:
        engine.MAX_SHRINKING_SECONDS = saved


def replay_line(path: Path) -> str:
    return f"replay: python -m properties.replay {path} --mode inprocess  (or --mode process)"


def report(what: str, schedule: Schedule, path: Path) -> str:
    """The lines every saved failure prints: violation, seed, file, replay command."""
    return (
        f"{what}: {len(schedule.events)} events, seed {schedule.seed}, profile "
        f"{schedule.profile}, runtime {schedule.variant or 'correct'}\n"
        f"violation: {schedule.failure}\n{program(schedule.events)}\n"
        f"saved to {path}\n{replay_line(path)}"
    )


class ScheduleMachine(DisruptionRules, OperatorRules, RuleBasedStateMachine):
    """Bound to a runner by :func:`bind`; one instance per example."""

    runner: ClassVar[ScheduleRunner]
    name: ClassVar[str] = "schedule"
    seed: ClassVar[int | None] = None
    profile: ClassVar[str | None] = None
    failures_dir: ClassVar[Path] = FAILURES
    progress: ClassVar[Progress | None] = None
    saved: ClassVar[list[tuple[Path, Schedule]]]
    first_failure: ClassVar[float | None] = None  # time.monotonic() of the first failure
    found_after: ClassVar[int | None] = None  # examples run when it came

    def __init__(self) -> None:
        super().__init__()
        self.events: list[Event] = []
        self.failed = False
        self.runner.on_event = hypothesis.event
        self.runner.reset()
        if self.progress is not None:
            s = self.runner.stats
            self.progress.update(s.examples, s.events, s.crashes)

    # -- which runs a rule may pick ------------------------------------------------------------

    def _runs(self, which: str) -> list[str]:
        r = self.runner
        names = [run_id(i) for i in range(RUNS)]
        if which == "unstarted":
            return [n for n in names if n not in r.started]
        if which == "active":
            return [n for n in r.started if r.active.get(n) is not None]
        if which == "waiting":
            return [n for n in r.started if r.waiting.get(n)]
        if which == "live":
            return [n for n in r.started if r.active.get(n) is not None or r.waiting.get(n)]
        if which == "unfinished":
            return [n for n in r.started if r.status(n) not in ("done", "failed", "cancelled")]
        if which in ("started", "attention"):  # for an operator: any run, or a parked one
            return [n for n in r.started if which == "started" or r.status(n) == "needs_attention"]
        if which == "parked":  # needs attention, and none of its workers is alive
            return [
                n
                for n in r.started
                if r.status(n) == "needs_attention"
                and not any(w.alive for w in r.workers if w.run == n)
            ]
        raise ValueError(which)

    def _pick(self, which: str, pick: int) -> int:
        runs = self._runs(which)
        return int(runs[pick % len(runs)][1:])

    def _can(self, which: str) -> bool:
        return bool(self._runs(which))

    def _do(self, *events: Event) -> None:
        """Apply ``events`` in order, checking the invariants between them (the last one is
        checked by :meth:`invariants_hold`, as after every rule)."""
        try:
            for i, event in enumerate(events):
                if i:
                    self.runner.check()
                self.events.append(event)
                self.runner.apply(event)
        except BaseException as exc:
            self._failed(exc)
            raise

    # -- rules ---------------------------------------------------------------------------------

    @precondition(lambda self: self._can("unstarted"))
    @rule(pick=PICK, kind=st.sampled_from(KINDS))
    def start(self, pick: int, kind: str) -> None:
        agent = None if kind == DEFAULT_KIND else kind
        self._do(Event(op="start", run=self._pick("unstarted", pick), agent=agent))

    @precondition(lambda self: self._can("parked"))
    @rule(pick=PICK)
    def resolve(self, pick: int) -> None:
        """An operator resolves a parked run's call in doubt (its workers are gone)."""
        self._do(Event(op="resolve", run=self._pick("parked", pick)))

    @precondition(lambda self: self._can("active"))
    @rule(pick=PICK)
    def step(self, pick: int) -> None:
        self._do(Event(op="step", run=self._pick("active", pick)))

    @precondition(lambda self: self._can("active"))
    @rule(pick=PICK, point=POINT, seq=SEQ, kill=st.booleans())
    def crash(self, pick: int, point: str, seq: int | None, kill: bool) -> None:
        run = self._pick("active", pick)
        self._do(Event(op="crash", run=run, point=point, seq=seq, kill=kill))

    @precondition(lambda self: bool(self.runner.started))
    @rule()
    def land(self) -> None:
        self._do(Event(op="land"))

    @precondition(lambda self: self._can("active"))
    @rule(pick=PICK, point=POINT, seq=SEQ)
    def pause(self, pick: int, point: str, seq: int | None) -> None:
        self._do(Event(op="pause", run=self._pick("active", pick), point=point, seq=seq))

    @precondition(lambda self: self._can("active"))
    @rule(pick=PICK, point=POINT, seq=SEQ)
    def stall(self, pick: int, point: str, seq: int | None) -> None:
        self._do(Event(op="stall", run=self._pick("active", pick), point=point, seq=seq))

    @precondition(lambda self: self._can("waiting"))
    @rule(pick=PICK)
    def resume(self, pick: int) -> None:
        self._do(Event(op="resume", run=self._pick("waiting", pick)))

    @precondition(lambda self: self._can("unfinished"))
    @rule(pick=PICK)
    def restart(self, pick: int) -> None:
        self._do(Event(op="restart", run=self._pick("unfinished", pick)))

    @precondition(lambda self: self._can("unfinished"))
    @rule(seconds=SWEEPS)
    def sweep(self, seconds: float | None) -> None:
        self._do(Event(op="sweep", seconds=seconds))

    @precondition(lambda self: self._can("unfinished"))
    @rule(seconds=TICKS)
    def tick(self, seconds: float) -> None:
        self._do(Event(op="tick", seconds=seconds))

    @precondition(lambda self: self._can("live"))
    @rule(pick=PICK)
    def heartbeat(self, pick: int) -> None:
        self._do(Event(op="heartbeat", run=self._pick("live", pick)))

    # -- checks --------------------------------------------------------------------------------

    @invariant()
    def invariants_hold(self) -> None:
        try:
            self.runner.check()
        except BaseException as exc:
            self._failed(exc)
            raise

    def teardown(self) -> None:
        try:
            if not self.failed:
                self.runner.settle()
                self.runner.check_final()
        except BaseException as exc:
            self._failed(exc)
            raise
        finally:
            self.runner.cleanup()

    # -- failures ------------------------------------------------------------------------------

    def _failed(self, exc: BaseException) -> None:
        if self.failed:
            return
        self.failed = True
        cls = type(self)
        final = current_build_context().is_final
        if not final and cls.first_failure is not None:
            return
        schedule = Schedule(
            events=tuple(self.events),
            name=self.name,
            variant=None if self.runner.variant.name == "correct" else self.runner.variant.name,
            seed=self.seed,
            profile=self.profile,
            failure=f"{type(exc).__name__}: {exc}",
            meta={"runner": self.runner.mode, "trace": list(self.runner.trace)},
        )
        digest = hashlib.sha1(json.dumps([e.to_json() for e in self.events]).encode()).hexdigest()
        stem = self.name if final else f"{self.name}-unshrunk"
        path = schedule.save(self.failures_dir / f"{stem}-{digest[:8]}.json")
        if not final:
            cls.first_failure = time.monotonic()
            cls.found_after = self.runner.stats.examples
            print(report("failing schedule (saved before shrinking)", schedule, path))
            return
        cls.saved.append((path, schedule))
        if self.progress is not None:
            self.progress.finding()
        message = report("shrunk schedule", schedule, path)
        note(message)
        print(message)


def bind(
    runner: ScheduleRunner,
    *,
    name: str = "schedule",
    seed: int | None = None,
    profile: str | None = None,
    failures_dir: Path = FAILURES,
    progress: Progress | None = None,
) -> type[ScheduleMachine]:
    """A machine class over ``runner``; ``seed`` fixes Hypothesis' randomness."""
    bound = type(
        f"{ScheduleMachine.__name__}_{name}",
        (ScheduleMachine,),
        {
            "runner": runner,
            "name": name,
            "seed": seed,
            "profile": profile,
            "failures_dir": failures_dir,
            "progress": progress,
            "saved": [],
            "first_failure": None,
            "found_after": None,
        },
    )
    if seed is not None:
        bound = hypothesis.seed(seed)(bound)
    return bound
