"""A scenario while it runs, and the serial way to run scenarios.

A ``ScenarioRun`` hands out the specs of its lives one at a time (the next one depends on
how the previous one ended) and keeps what they did. Whoever runs lives, the serial loop
below or the process pool (``_pool``), asks it for the next spec until there is none, then
calls ``done``, which judges the scenario and may return follow-up scenarios (the second
crash points of ``crashes=2``, which come from the resumed life of this very scenario).

``order`` is the scenario's place in the depth-first plan; sorting finished scenarios by it
gives the same report whatever ran first.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol, TypeVar

from crashresume._context import ScenarioLog
from crashresume._runner import Factory, Life, LifeSpec, Runner
from crashresume._scenarios import Point, scenario_id


class Runnable(Protocol):
    """Anything that hands out lives to run one at a time and takes their outcomes."""

    def next_spec(self) -> LifeSpec | None: ...

    def add(self, life: Life) -> None: ...


class OneLife:
    """Runs exactly one given life (the Hypothesis mode picks each crash point itself)."""

    __slots__ = ("life", "spec")

    def __init__(self, spec: LifeSpec) -> None:
        self.spec: LifeSpec | None = spec
        self.life: Life | None = None

    def next_spec(self) -> LifeSpec | None:
        spec, self.spec = self.spec, None
        return spec

    def add(self, life: Life) -> None:
        self.life = life


class ScenarioRun:
    """The lives of one scenario: die at each of ``points`` in turn, then run to the end."""

    __slots__ = ("baseline", "lives", "log", "order", "plan", "points", "sid")

    def __init__(
        self, order: tuple[int, ...], points: tuple[Point, ...], *, sid: str | None = None
    ) -> None:
        self.order = order
        self.points = points
        self.sid = scenario_id(points) if sid is None else sid
        self.baseline = not points
        self.log = ScenarioLog()
        self.lives: list[Life] = []
        self.plan: tuple[Point | None, ...] = (*points, None)

    def next_spec(self) -> LifeSpec | None:
        """The next life to run, or None when the scenario is over."""
        lives = self.lives
        if lives and (lives[-1].crash_step is None or len(lives) == len(self.plan)):
            return None
        index = len(lives)
        return LifeSpec(
            run_id=self.sid,
            log=self.log,
            crash=self.plan[index],
            restart=index > 0,
            baseline=self.baseline,
        )

    def add(self, life: Life) -> None:
        self.lives.append(life)

    @property
    def complete(self) -> bool:
        """Every planned crash point was reached and the last life ran to its end."""
        return len(self.lives) == len(self.plan) and self.lives[-1].crash_step is None

    def notes(self) -> list[str]:
        """What the report should say about this scenario besides its findings."""
        notes: list[str] = []
        for life in self.lives:
            if life.swallowed:
                notes.append(
                    f"{self.sid}: the subject caught the injected SimulatedCrash instead of "
                    "dying (except BaseException or a bare except); in-process the code after "
                    "the catch still ran. Let SimulatedCrash propagate, or use mode='process'."
                )
            notes.extend(life.notes)
        last = self.lives[-1]
        if len(self.lives) < len(self.plan) and last.completed:
            notes.append(
                f"{self.sid}: the crash point was never reached (that life made only "
                f"{last.calls} effect call{'' if last.calls == 1 else 's'})"
            )
        return notes


R = TypeVar("R", bound=Runnable)


class Executor(Protocol):
    """Runs scenarios: serially through a runner, or in a process pool."""

    mode: str

    def execute(
        self,
        factory: Factory,
        inputs: Sequence[Any],
        runs: Sequence[R],
        done: Callable[[R], Sequence[R]],
    ) -> None: ...

    def life(self, factory: Factory, inputs: Sequence[Any], spec: LifeSpec) -> Life: ...

    def close(self) -> None: ...


class SerialExecutor:
    """Runs scenarios one life at a time through a runner, depth first."""

    def __init__(self, runner: Runner) -> None:
        self.mode = runner.mode
        self._runner = runner

    def execute(
        self,
        factory: Factory,
        inputs: Sequence[Any],
        runs: Sequence[R],
        done: Callable[[R], Sequence[R]],
    ) -> None:
        pending = list(reversed(runs))
        while pending:
            run = pending.pop()
            while (spec := run.next_spec()) is not None:
                run.add(self._runner.life(factory, inputs, spec))
            pending.extend(reversed(done(run)))

    def life(self, factory: Factory, inputs: Sequence[Any], spec: LifeSpec) -> Life:
        return self._runner.life(factory, inputs, spec)

    def close(self) -> None:
        close = getattr(self._runner, "close", None)
        if close is not None:
            close()
