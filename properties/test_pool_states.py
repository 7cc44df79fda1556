"""The supervisor states the pool world never reaches by itself (properties.pool_states):
the real supervisor passes each story, and each story's judge (and ``pool_room``, checked
at every pass) fails a supervisor planted with the slip it is there for."""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import pytest

from agent_runtime.store import db
from agent_runtime.supervisor import unserved
from agent_runtime.supervisor.supervision import Supervisor
from agent_runtime.supervisor.unserved import UnservedWatch

from .events import Event
from .planting import plant_python, plant_sql
from .pool_runner import PoolRunner
from .pool_states import SETTINGS, state_problem
from .runners import outcome_and_trace
from .server import SuiteDatabase


@pytest.fixture(scope="module")
def pool(suite_database: SuiteDatabase) -> Iterator[PoolRunner]:
    runner = PoolRunner(suite_database.url, server=suite_database)
    try:
        runner.warm()
        yield runner
    finally:
        runner.close()


def _planted(pool: PoolRunner, cls: type[Supervisor], name: str) -> str:
    pool.world.supervisor_class = cls
    try:
        found = state_problem(pool, name)
    finally:
        pool.world.supervisor_class = Supervisor
    assert found is not None, f"the story {name!r} passed a supervisor planted with a slip"
    return found


@pytest.mark.parametrize("name", list(SETTINGS))
def test_the_real_supervisor_reaches_each_state_as_its_story_says(
    pool: PoolRunner, name: str
) -> None:
    assert state_problem(pool, name) is None


class _NoRoomUntilFull(Supervisor):
    """``_room``'s ``<`` as ``is``: no spare below ``max_workers``, one over it once full."""

    def _room(self) -> bool:
        return not self.stopping and len(self.workers) is self.settings.max_workers


class _NoSpare(Supervisor):
    """Never keeps an idle worker beside the busy ones."""

    def _keep_spare(self) -> None:
        return None


def test_a_supervisor_that_starts_a_spare_in_a_full_pool_is_caught(pool: PoolRunner) -> None:
    found = _planted(pool, _NoRoomUntilFull, "full")
    assert "[pool_room]" in found and "3 pool workers" in found and "max_workers 2" in found


def test_a_supervisor_that_keeps_no_spare_while_it_has_room_is_caught(pool: PoolRunner) -> None:
    pool.world.supervisor_class = _NoSpare
    try:
        outcome, _ = outcome_and_trace(pool, [Event(op="start", run=0), Event(op="start", run=1)])
    finally:
        pool.world.supervisor_class = Supervisor
    assert isinstance(outcome, str) and "[pool_room]" in outcome and "keeps a spare" in outcome


def _with_watchdog(**changes: float) -> type[Supervisor]:
    class Planted(Supervisor):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            for name, value in changes.items():
                setattr(self.watchdog, name, value)

    return Planted


def test_a_watchdog_that_kills_a_lost_worker_at_once_or_never_is_caught(pool: PoolRunner) -> None:
    at_once = _planted(pool, _with_watchdog(lease=-1.0), "lost")
    assert "killed as lost at (event, measure) [(3, 'run_lost_ago=0.0s')]" in at_once
    never = _planted(pool, _with_watchdog(lease=math.inf), "lost")
    assert "killed as lost at (event, measure) []" in never


def test_a_watchdog_that_kills_too_early_or_never_as_stuck_is_caught(pool: PoolRunner) -> None:
    early = _planted(pool, _with_watchdog(stuck_after=0.5), "stuck")
    assert "[worker] run r0" in early and "w1 stopped with crashed" in early, early
    never = _planted(pool, _with_watchdog(stuck_after=0.0), "stuck")
    assert "the stuck worker was killed at []" in never


class _Early(Supervisor):
    """Names a run of another agent a sixth of ``UNSERVED_AFTER`` polls early."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.unserved.poll *= 5 / 6


class _Forgetting(UnservedWatch):
    def look(self, conn: db.Connection) -> list[str]:
        fresh = super().look(conn)
        self.named = set()  # every look names them all again
        return fresh


class _Repeating(Supervisor):
    """Forgets what it named: every look names every waiting run again."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.unserved = _Forgetting(self.unserved.agents, self.unserved.poll)


def test_a_supervisor_that_names_an_unserved_run_early_or_again_is_caught(
    pool: PoolRunner,
) -> None:
    early = _planted(pool, _Early, "unserved")
    assert "runs named at each second" in early and "(5, {'u0'})" in early
    again = _planted(pool, _Repeating, "unserved")
    assert "runs named at each second" in again


@pytest.mark.parametrize(
    "mutant",
    [
        "drop_conjunct:f4d61ffd",  # the five seconds
        "drop_conjunct:f9245746",  # a free lease
    ],
)
def test_a_supervisor_that_gives_up_too_soon_or_too_much_is_caught(
    pool: PoolRunner, monkeypatch: pytest.MonkeyPatch, mutant: str
) -> None:
    """``give_up_exhausted`` without one of its conditions (the pool stage never gave a run
    up before: every one of its mutants lived; the mutation driver runs the rest)."""
    plant_sql(monkeypatch, f"sql/queries.sql:give_up_exhausted:{mutant}")

    found = state_problem(pool, "gave_up")

    assert found is not None and "runs given up at (event, run)" in found


def test_a_cut_look_that_forgets_what_it_named_is_caught(
    pool: PoolRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    old = "if len(rows) >= LIMIT else waiting"
    planted = plant_python(monkeypatch, unserved, old, old.replace(">=", ">"))
    monkeypatch.setattr(unserved.UnservedWatch, "look", planted.UnservedWatch.look)
    found = state_problem(pool, "unserved_cut")
    assert found is not None and "u0, waiting all along, was said unserved 2 times" in found
