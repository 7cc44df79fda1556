"""current_context() from every thread of a start, and crashes that hit another thread."""

from __future__ import annotations

import contextlib
import queue
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

import crashresume._watchdog
from crashresume import Context, conform, current_context

from .subjects import AFTER, JOBS, SqliteAgent, at, expect, factory, per_scenario
from .subjects import SeedAgent as _SeedAgent

MODES = ["inprocess", "process"]


def charge_from(ctx: Context | None, job: str, *, keyed: bool) -> Any:
    """What a framework's worker does: find the harness itself, never handed ctx."""
    assert ctx is not None, "current_context() was None on a thread of the start"
    return ctx.effect("charge", job, key=f"charge:{job}" if keyed else None)


class OnItsOwnThread(SqliteAgent):
    """Does each charge on a fresh threading.Thread that finds the context by itself."""

    def step(self, job: str) -> None:
        if self.db.execute("SELECT 1 FROM done WHERE job = ?", (job,)).fetchone():
            return
        results: list[Any] = []

        def work() -> None:
            results.append(charge_from(current_context(), job, keyed=self.KEYED))

        worker = threading.Thread(target=work)
        worker.start()
        worker.join()
        if not results:  # the crash hit the worker: a real process would be gone now
            return
        with self.db:
            self.db.execute("INSERT INTO done (job, receipt) VALUES (?, ?)", (job, results[0]))


class UnkeyedOnItsOwnThread(OnItsOwnThread):
    KEYED = False


@pytest.mark.parametrize("mode", MODES)
def test_a_thread_the_subject_starts_sees_the_start_context_in_both_modes(
    mode: str, tmp_path: Path
) -> None:
    (tmp_path / "good").mkdir()
    (tmp_path / "bad").mkdir()
    good = conform(per_scenario(tmp_path / "good", OnItsOwnThread, ".db"), JOBS, mode=mode)
    bad = conform(per_scenario(tmp_path / "bad", UnkeyedOnItsOwnThread, ".db"), JOBS, mode=mode)

    assert good.passed, str(good)
    assert good.baseline_effects == 3
    # A crash on the worker thread ends the start: the resume re-sends the unkeyed charge.
    assert at(bad.findings) == expect("duplicate_effect", AFTER) | expect("resume_diverged", AFTER)
    assert bad.notes == []  # not "the subject caught the crash": it hit another thread


@pytest.fixture
def pool() -> Iterator[ThreadPoolExecutor]:
    """A framework's thread pool, made once, outside every start, and reused by all of them."""
    executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="framework")
    yield executor
    executor.shutdown(wait=True)


def test_a_pool_thread_that_outlives_every_start_sees_the_one_running_now(
    pool: ThreadPoolExecutor,
) -> None:
    seen: dict[str, set[str | None]] = {}

    class Agent(_SeedAgent):
        def charge(self, job: str) -> Any:
            def work() -> Any:
                ctx = current_context()
                seen.setdefault(self.ctx.run_id, set()).add(None if ctx is None else ctx.run_id)
                return charge_from(ctx, job, keyed=True)

            return pool.submit(work).result()

    report = conform(factory(Agent), inputs=JOBS)

    assert report.passed, str(report)
    assert seen and all(ids == {run_id} for run_id, ids in seen.items())
    assert pool.submit(current_context).result() is None  # outside conform: nothing


def test_between_starts_and_after_conform_a_bystander_thread_sees_no_context() -> None:
    asks: queue.Queue[queue.Queue[Context | None] | None] = queue.Queue()

    def bystander() -> None:
        while (reply := asks.get()) is not None:
            reply.put(current_context())

    def ask() -> Context | None:
        reply: queue.Queue[Context | None] = queue.Queue()
        asks.put(reply)
        return reply.get(timeout=10)

    thread = threading.Thread(target=bystander)
    thread.start()
    during: list[bool] = []
    make = factory(_SeedAgent)

    def make_agent(ctx: Context) -> Any:
        between.append(ask())  # inside a start, before its first step: this start
        return make(ctx)

    between: list[Context | None] = []

    class Wrapped:
        def __init__(self, ctx: Context) -> None:
            self.inner = make_agent(ctx)
            self.ctx = ctx

        def step(self, job: str) -> None:
            during.append(ask() is self.ctx)
            self.inner.step(job)

    try:
        assert conform(Wrapped, inputs=JOBS).passed
        after = ask()
    finally:
        asks.put(None)
        thread.join()

    assert during and all(during)
    assert all(ctx is not None for ctx in between)
    assert after is None


def test_a_framework_thread_that_swallows_the_crash_still_ends_the_start() -> None:
    """The step returns normally, but the start is dead: nothing more is stepped."""
    stepped: dict[str, list[str]] = {}

    class Agent(_SeedAgent):
        def step(self, job: str) -> None:
            stepped.setdefault(self.ctx.run_id, []).append(job)
            super().step(job)

        def charge(self, job: str) -> Any:
            def work() -> Any:
                try:
                    return charge_from(current_context(), job, keyed=False)
                except BaseException:  # a framework logging and dropping a dead task
                    return None

            with ThreadPoolExecutor(max_workers=1) as executor:
                return executor.submit(work).result()

    report = conform(factory(Agent), inputs=JOBS, only="run-2")

    assert stepped["run-2"] == ["job-1", "job-2", *JOBS]  # died during job-2, then all again
    assert at(report.findings) == {("run-2", "duplicate_effect")}
    assert report.notes == []


def test_a_start_thread_blocked_on_a_dead_worker_is_abandoned_after_a_grace(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(crashresume._watchdog, "CRASH_GRACE", 0.2)
    waits: list[threading.Event] = []

    class Agent(_SeedAgent):
        def charge(self, job: str) -> Any:
            answered = threading.Event()
            waits.append(answered)

            def work() -> None:
                blocked.wait()  # the start's thread is about to block in C
                time.sleep(0.1)  # ... and now it has
                try:
                    charge_from(current_context(), job, keyed=True)
                except BaseException:
                    return  # died; the waiter below is never told
                answered.set()

            blocked = threading.Event()
            threading.Thread(target=work).start()
            blocked.set()
            answered.wait()  # blocked in C for an answer the dead worker never sends
            return None

    try:
        report = conform(factory(Agent), inputs=JOBS, only="run-2", timeout=30)
    finally:
        for answered in waits:
            answered.set()  # let the abandoned thread end

    assert report.scenarios == ["run-2"]
    assert len(report.notes) == 1
    assert report.notes[0].startswith("run-2: the start died on thread 'Thread-")
    assert "abandoned. Make such waits check ctx.crashed" in report.notes[0]


def test_ctx_crashed_tells_an_adapter_that_its_start_died_elsewhere() -> None:
    before: list[bool] = []
    caught: list[tuple[str, str, bool]] = []

    class Agent(_SeedAgent):
        def charge(self, job: str) -> Any:
            ctx = current_context()
            assert ctx is not None
            before.append(ctx.crashed)
            worker = threading.Thread(target=_swallow, args=(ctx, job, caught))
            worker.start()
            worker.join()
            return None

    conform(factory(Agent), inputs=JOBS, only="run-2")

    assert before and not any(before)
    assert caught == [("run-2", "job-2", True)]


def _swallow(ctx: Context, job: str, caught: list[tuple[str, str, bool]]) -> None:
    try:
        ctx.effect("charge", job, key=job)
    except BaseException:
        caught.append((ctx.run_id, job, ctx.crashed))


def test_with_timeout_none_every_start_runs_on_the_calling_thread() -> None:
    threads: set[str] = set()

    class Agent(_SeedAgent):
        def step(self, job: str) -> None:
            threads.add(threading.current_thread().name)
            super().step(job)

    assert conform(factory(Agent), inputs=JOBS, timeout=None).passed
    assert threads == {threading.current_thread().name}

    threads.clear()
    assert conform(factory(Agent), inputs=JOBS).passed
    assert threading.current_thread().name not in threads
    assert all(name.startswith("crashresume start run") for name in threads)


def test_a_start_whose_thread_swallows_the_delivered_crash_is_fed_no_more_inputs() -> None:
    stepped: dict[str, list[str]] = {}

    class Agent(_SeedAgent):
        def step(self, job: str) -> None:
            stepped.setdefault(self.ctx.run_id, []).append(job)
            with contextlib.suppress(BaseException):  # swallows the crash from the worker
                super().step(job)

        def charge(self, job: str) -> Any:
            with ThreadPoolExecutor(max_workers=1) as executor:
                return executor.submit(charge_from, current_context(), job, keyed=True).result()

    report = conform(factory(Agent), inputs=JOBS, only="run-before-2")

    assert stepped["run-before-2"][:2] == ["job-1", "job-2"]  # the dead start stopped there
    assert stepped["run-before-2"][2:] == JOBS  # and the resume was fed everything
    assert report.passed, str(report)
