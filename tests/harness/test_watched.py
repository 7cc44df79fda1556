"""The in-process loop runs on a start thread watched from the caller's (``_watched``)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from crashresume import Context, conform
from crashresume._context import ScenarioLog
from crashresume._plan import OneLife
from crashresume._runner import LifeSpec
from crashresume._scenarios import Point
from crashresume._watchdog import InProcessRunner
from crashresume._watched import WatchedExecutor

from .subjects import JOBS, MemoryStore, SeedAgent, at, expect, factory

HANG = 0.3  # seconds: the timeout these tests give a start that never returns


@pytest.fixture
def release() -> Iterator[threading.Event]:
    """Hung starts wait on this; set at the end so their threads can end."""
    event = threading.Event()
    yield event
    event.set()


def spec(run_id: str, crash: Point | None = None) -> LifeSpec:
    return LifeSpec(run_id=run_id, log=ScenarioLog(), crash=crash, restart=False, baseline=False)


def test_a_loop_of_many_lives_never_wakes_the_watching_thread() -> None:
    executor = WatchedExecutor(InProcessRunner(60.0))
    die = Point(call=1, before=False)
    runs = [OneLife(spec(f"run-{i}", die if i % 2 else None)) for i in range(200)]
    callers: set[int] = set()

    class Agent:
        def __init__(self, ctx: Context) -> None:
            callers.add(threading.get_ident())

            self.ctx = ctx

        def step(self, item: str) -> None:
            time.sleep(0.0005)  # lets go of the GIL: a caller rung per crash would run here
            self.ctx.effect("charge", item)

    executor.execute(Agent, ["a"], runs, lambda run: ())

    lives = [run.life for run in runs]
    assert all(life is not None and life.completed for life in lives[::2])
    assert all(life is not None and life.crash_step == 0 for life in lives[1::2])  # crashed
    assert callers and threading.get_ident() not in callers  # the lives ran elsewhere
    assert executor.wakeups <= 1  # 200 lives, 100 crashes: not a hand-over each


def test_every_hang_in_the_loop_still_times_out_and_a_new_start_thread_carries_on(
    release: threading.Event,
) -> None:
    threads: dict[str, int] = {}

    class HangsOnResume(SeedAgent):
        def __init__(self, ctx: Context, store: MemoryStore) -> None:
            super().__init__(ctx, store)
            threads[ctx.run_id] = threading.get_ident()
            if self.done and ctx.run_id in {"run-2", "run-3"}:
                release.wait()  # hangs in a C call: no asynchronous exception reaches it

    report = conform(factory(HangsOnResume), inputs=JOBS, timeout=HANG)

    assert at(report.findings) == expect("timeout", {"run-2", "run-3"})
    # The hung start kept its thread; the next scenario ran on a new one, and so on.
    assert threads["run-before-2"] == threads["run-2"]
    assert threads["run-2"] != threads["run-before-3"] == threads["run-3"]


def test_a_start_that_returns_after_it_was_abandoned_is_not_counted(
    release: threading.Event,
) -> None:
    executor = WatchedExecutor(InProcessRunner(HANG))
    slow, after = OneLife(spec("slow")), OneLife(spec("after"))
    judged: list[str] = []
    returned = threading.Event()

    class Agent:
        def __init__(self, ctx: Context) -> None:
            self.ctx = ctx

        def step(self, item: Any) -> None:
            if self.ctx.run_id == "slow":
                release.wait()
                returned.set()

    def done(run: OneLife) -> tuple[()]:
        assert run.life is not None
        judged.append("slow" if run is slow else "after")
        return ()

    executor.execute(Agent, ["a"], [slow, after], done)
    release.set()
    assert returned.wait(5)

    assert slow.life is not None and slow.life.timed_out is not None
    assert after.life is not None and after.life.completed
    assert judged == ["slow", "after"]  # each judged once, the late return ignored
