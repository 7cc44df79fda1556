"""The pool mode: the real supervisor and its long-lived pool workers under schedules.

- Calm schedules (no worker dies, stalls or is outpaced) must give the real supervisor
  and pool exactly the in-process runner's outcome *and* trace: there the mimic claims
  what the supervisor claims, in the same order.
- Any schedule of the pool's events (SIGKILL, SIGTERM and SIGSTOP of pool workers, the
  supervisor's hang-up and SIGTERM, a rival supervisor) keeps every invariant, the pool's
  own included; and one replays the same every time.
- The pool's invariants fail where they should: a supervisor that leaves a dead worker's
  run to its lease, one that lets runs wait beside an idle worker, a pool worker that
  keeps the agent of its first run, one that SIGKILLs its workers at a stop.
"""

from __future__ import annotations

import hashlib
import json
import signal
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given

import agent_runtime.loop.worker
from agent_runtime.store.records import Lease
from agent_runtime.supervisor import supervision
from agent_runtime.supervisor.supervision import Supervisor
from agent_runtime.supervisor.workerpool import WorkerProcess
from agent_runtime.tools.agent import Agent
from agent_runtime.tools.agent import agent_of as real_agent_of

from . import pool_world
from .events import Event, Schedule
from .machine import FAILURES, SHRINK_BUDGET, report, shrinking_within
from .pilots import Exit, Start
from .pool_pilot import PoolPilot
from .pool_runner import PoolRunner
from .pool_stories import (
    CALM,
    CANCELLED_BEFORE_ADOPTION,
    CRASH_THEN_CANCEL,
    CRASH_THEN_HANGUP,
    FIRST_CRASH,
    ORPHAN_BESIDE_HAND_STARTED,
    STORMY,
    STORY,
    STORY_SAYS,
    WATCHDOG,
)
from .pool_strategies import calm_schedules, pool_schedules
from .pool_world import PoolWorld, Supervised
from .profiles import active_profile, profile_settings
from .remotes import HttpRemotes
from .runner import SETTINGS
from .runners import InProcessRunner, ProcessRunner, outcome_and_trace
from .server import SuiteDatabase


@pytest.fixture(scope="module")
def pool_runner(
    suite_database: SuiteDatabase, process_runner: ProcessRunner
) -> Iterator[PoolRunner]:
    # the process runner's mocks: starting three uvicorn servers again costs seconds
    remotes = process_runner.remotes
    assert isinstance(remotes, HttpRemotes)
    runner = PoolRunner(suite_database.url, server=suite_database, remotes=remotes)
    try:
        runner.warm()
        yield runner
    finally:
        runner.close()


def _save(events: list[Event], failure: str, name: str) -> None:
    schedule = Schedule(
        events=tuple(events), name=name, profile=active_profile(), failure=failure,
        meta={"runner": "pool"},
    )  # fmt: skip
    digest = hashlib.sha1(json.dumps([e.to_json() for e in events]).encode()).hexdigest()
    path = schedule.save(FAILURES / f"{name}-{digest[:8]}.json")
    print(report("failing schedule", schedule, path).replace("--mode inprocess", "--mode pool"))


def test_calm_schedules_give_the_real_pool_the_inprocess_runners_outcome_and_trace(
    inprocess_runner: InProcessRunner, pool_runner: PoolRunner
) -> None:
    profile = active_profile()

    @profile_settings(profile, max_examples=CALM[profile], stateful_step_count=10)
    @given(calm_schedules(max_events=8))
    def agree(events: list[Event]) -> None:
        fast, fast_trace = outcome_and_trace(inprocess_runner, events)
        assert not isinstance(fast, str), fast
        real, real_trace = outcome_and_trace(pool_runner, events)
        problem = None
        if fast_trace != real_trace:
            problem = f"traces differ\ninprocess: {fast_trace}\npool:      {real_trace}"
        elif fast != real:
            problem = f"outcomes differ\ninprocess: {fast}\npool:      {real}"
        if problem is not None:
            _save(events, problem, "pool-calm")
            raise AssertionError(problem)

    with shrinking_within(SHRINK_BUDGET):
        agree()


def test_pool_schedules_keep_every_invariant_with_the_real_supervisor(
    pool_runner: PoolRunner,
) -> None:
    profile = active_profile()
    before = dict(pool_runner.stats.events_by_op)

    @profile_settings(profile, max_examples=STORMY[profile], stateful_step_count=10)
    @given(pool_schedules(max_events=9))
    def holds(events: list[Event]) -> None:
        outcome, _ = outcome_and_trace(pool_runner, events)
        if isinstance(outcome, str):
            _save(events, outcome, "pool")
            raise AssertionError(outcome)

    with shrinking_within(SHRINK_BUDGET):
        holds()
    ran = {op: n - before.get(op, 0) for op, n in pool_runner.stats.events_by_op.items()}
    print(f"pool events: {ran}; pool faults: {pool_runner.stats.faults}")


def test_a_pool_schedule_replays_the_same_every_time(pool_runner: PoolRunner) -> None:
    first, first_trace = outcome_and_trace(pool_runner, STORY)
    again, again_trace = outcome_and_trace(pool_runner, STORY)
    assert not isinstance(first, str), first
    assert (again_trace, again) == (first_trace, first)
    text = "\n".join(first_trace)
    for said in STORY_SAYS:
        assert said in text, f"{said!r} not in\n{text}"
    assert all(first[run]["status"] == "done" for run in ("r0", "r1", "r2"))


def test_a_run_cancelled_before_its_pool_worker_adopts_it_ends_as_the_schedule_says(
    pool_runner: PoolRunner,
) -> None:
    """The supervisor claimed r0 and handed it to a pool worker; the operator cancels it
    before the worker adopts the lease, so the worker refuses it (exit 5, RunUnavailable):
    what the cancel explains, not a violation (the dev profile's hunt found this)."""
    outcome, trace = outcome_and_trace(pool_runner, CANCELLED_BEFORE_ADOPTION)
    assert not isinstance(outcome, str), f"{outcome}\n" + "\n".join(trace)
    assert outcome["r0"]["status"] == "cancelled"


def test_a_worker_the_database_crash_stopped_with_its_supervisor_gone_is_explained(
    pool_runner: PoolRunner,
) -> None:
    """The database crashes under a pool worker and its supervisor hangs up: the worker
    exits 4 and nobody can record why on the run. That is the crash's doing (the dev
    profile's hunt found it reported as an unexplained exit 4)."""
    outcome, trace = outcome_and_trace(pool_runner, CRASH_THEN_HANGUP)
    assert not isinstance(outcome, str), f"{outcome}\n" + "\n".join(trace)


def test_an_orphan_leaves_when_its_run_is_done_while_a_hand_started_worker_lives(
    pool_runner: PoolRunner,
) -> None:
    """The supervisor dies; its busy worker finishes its run, finds the pipe closed and
    exits, although a worker an operator started by hand is alive beside it (were it a
    fork of the runner it would hold the pipe open, and the orphan would wait forever)."""
    outcome, trace = outcome_and_trace(pool_runner, ORPHAN_BESIDE_HAND_STARTED)
    assert not isinstance(outcome, str), outcome
    assert "step r0: w1 ended: done" in trace, trace


class _Told:
    """A supervisor's stand-in that has heard one run end: (lease, code)."""

    def __init__(self, lease: Lease, code: int) -> None:
        self.heard = [(lease, code)]

    def reap(self) -> list[tuple[Lease, int]]:
        heard, self.heard = self.heard, []
        return heard


def test_an_end_heard_before_its_tenure_is_piloted_still_ends_that_tenure(
    tmp_path: Path,
) -> None:
    """One pass hands out r0 and r1; while the runner drives r0 to its first gate the
    supervisor hears that r1's worker parked it already (before any gate). r1's pilot,
    made next, must end at once, not wait for a word that was already read."""
    world = PoolWorld(
        "postgresql:///unused", SETTINGS, support_url="http://desk", log_dir=tmp_path,
        conn=lambda: None, expect_agent=lambda run: None,  # type: ignore[arg-type,return-value]
    )  # fmt: skip
    try:
        lease = Lease(run_id="r1", owner="sup:r1", generation=2)
        told = Supervised(name="main", supervisor=_Told(lease, 6))  # type: ignore[arg-type]
        world.reap(told)  # heard during r0's drive: r1 has no pilot yet
        start = Start(run_id="r1", label="w4", lease=lease)
        tenure = PoolPilot(
            start, world=world, supervised=told, proc=WorkerProcess(pid=1, lease=lease)
        )
        world.adopt(tenure)
        assert tenure.next(timeout=0.5) == Exit(kind="NeedsAttention", detail="code 6")
    finally:
        world.close()


class _Forgetful(Supervisor):
    """Leaves the run of a worker that died to its lease."""

    def _after_exit(self, lease: Lease, code: int, reason: str | None = None) -> None:
        return None


class _Punishing(Supervisor):
    """Backs off the run of a worker that crashed, as if it had exited with an error
    (``free_after_exit``'s ``code != EXIT_CRASHED``)."""

    def _after_exit(self, lease: Lease, code: int, reason: str | None = None) -> None:
        super()._after_exit(lease, 70 if code == 1 else code, reason)


class _Hoarding(Supervisor):
    """Claims nothing while one of its workers is idle (a wrong count of free slots)."""

    def _claim(self) -> list[WorkerProcess]:
        if any(w.idle for w in self.workers.values()):
            return []
        return super()._claim()


def _violation(runner: PoolRunner, events: list[Event]) -> str:
    outcome, trace = outcome_and_trace(runner, events)
    assert isinstance(outcome, str), f"no violation; trace: {trace}"
    return outcome


def test_a_supervisor_that_leaves_a_dead_workers_run_to_its_lease_is_caught(
    pool_runner: PoolRunner,
) -> None:
    pool_runner.world.supervisor_class = _Forgetful
    try:
        found = _violation(
            pool_runner, [Event(op="start", run=0), Event(op="crash", run=0, point="after_intent")]
        )
    finally:
        pool_runner.world.supervisor_class = Supervisor
    assert "[pool_freed] run r0" in found


def test_a_supervisor_that_backs_off_a_runs_first_worker_death_is_caught(
    pool_runner: PoolRunner,
) -> None:
    outcome, _ = outcome_and_trace(pool_runner, FIRST_CRASH)  # the real supervisor: no backoff
    assert not isinstance(outcome, str), outcome
    pool_runner.world.supervisor_class = _Punishing
    try:
        found = _violation(pool_runner, FIRST_CRASH)
    finally:
        pool_runner.world.supervisor_class = Supervisor
    assert "[pool_freed] run r0" in found and "only deaths in a row back off" in found


def test_a_supervisor_that_lets_runs_wait_beside_an_idle_worker_is_caught(
    pool_runner: PoolRunner,
) -> None:
    pool_runner.world.supervisor_class = _Hoarding
    try:
        done_then_new = [Event(op="start", run=0), *[Event(op="step", run=0)] * 4]
        found = _violation(pool_runner, [*done_then_new, Event(op="start", run=1)])
    finally:
        pool_runner.world.supervisor_class = Supervisor
    assert "[pool_idle_wait]" in found


def test_a_pool_worker_that_keeps_its_first_runs_agent_is_caught(
    pool_runner: PoolRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = real_agent_of
    first: dict[str, Agent] = {}

    def sticky(agents: Any, name: str, run_id: str) -> Agent:
        return first.setdefault("agent", real(agents, name, run_id))

    monkeypatch.setattr(agent_runtime.loop.worker, "agent_of", sticky)  # inherited by every fork
    events = [
        Event(op="start", run=0, agent="support"),
        *[Event(op="step", run=0)] * 6,
        Event(op="start", run=1),
    ]
    assert "[pool_agent] run r1" in _violation(pool_runner, events)


def test_the_supervisor_watches_for_hung_workers_at_every_sweep_event(
    pool_runner: PoolRunner,
) -> None:
    """Its watchdog runs at most twice a poll of real time; a sweep event is a poll's worth
    of time, so it kills the frozen worker whose lease ran out at the first sweep after, on
    a quiet machine as on a busy one (else the worker lives on to find its lease lost)."""
    for _ in range(2):
        outcome, trace = outcome_and_trace(pool_runner, WATCHDOG)
        assert not isinstance(outcome, str), outcome
        assert "waiting w1 ended: crashed" in "\n".join(trace), "\n".join(trace)


def test_a_worker_the_database_crash_stopped_after_a_cancel_is_explained_by_the_crash(
    pool_runner: PoolRunner,
) -> None:
    """The database crashes under a pool worker waiting to write its intent, then the
    operator cancels the run: the worker's next write meets its dead connection (exit 4,
    resumable) before it could learn of the cancel (exit 5). The crash explains it (the
    ci profile's hunt found this false alarm)."""
    outcome, trace = outcome_and_trace(pool_runner, CRASH_THEN_CANCEL)
    assert not isinstance(outcome, str), f"{outcome}\n" + "\n".join(trace)
    assert outcome["r0"]["status"] == "cancelled"


def test_a_supervisor_that_never_hears_its_workers_open_is_caught(
    pool_runner: PoolRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its pool workers' hello is read and dropped (``ready`` stays False): it keeps no
    spare, and a run handed on after a death waits for a new worker to open. The
    mutation runs found it (``WorkerProcess.ended``'s ``== "ready"`` as ``> "ready"``)."""
    heard = WorkerProcess.ended

    def deaf(proc: WorkerProcess) -> list[tuple[Lease, int]]:
        ended = heard(proc)
        proc.ready = False
        return ended

    monkeypatch.setattr(WorkerProcess, "ended", deaf)
    # The check waits READY_WAIT for a hello that was already read: a shorter wait finds
    # the same (a worker that opens at all opens within a second here).
    monkeypatch.setattr(pool_world, "READY_WAIT", 1.0)
    found = _violation(pool_runner, [Event(op="start", run=0), Event(op="sweep")])
    assert "[pool_ready]" in found


class _Abrupt(Supervisor):
    """Sends its workers no SIGTERM at its stop: each is SIGKILLed after the grace."""

    def shutdown(self) -> None:
        for proc in self.workers.values():
            proc.signal = _all_but_sigterm(proc.signal)  # type: ignore[method-assign,assignment]
        super().shutdown()


def _all_but_sigterm(send: Callable[[int], None]) -> Callable[[int], None]:
    return lambda signum: None if signum == signal.SIGTERM else send(signum)


def test_a_supervisor_that_kills_its_workers_at_a_stop_is_caught(
    pool_runner: PoolRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    """At its SIGTERM a supervisor SIGTERMs its workers (a busy one dies mid-step and its
    run is handed back at once); the stop reads how each really ended. The mutation runs
    found a shutdown without its SIGTERMs unseen: the world marked every end SIGTERM."""
    events = [Event(op="start", run=0), Event(op="stop_supervisor")]
    outcome, trace = outcome_and_trace(pool_runner, events)
    assert not isinstance(outcome, str), outcome
    assert "w1 ended: SIGTERM" in "\n".join(trace), trace
    monkeypatch.setattr(supervision, "STOP_GRACE", 0.2)  # the grace it waits for nothing
    pool_runner.world.supervisor_class = _Abrupt
    try:
        found = _violation(pool_runner, events)
    finally:
        pool_runner.world.supervisor_class = Supervisor
    assert "[pool_stop] run r0" in found and "was SIGKILLed" in found


def test_a_busy_gauge_that_counts_the_idle_workers_is_caught(
    pool_runner: PoolRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``/metrics``'s busy workers as ``_pool_counts``' ``is not`` -> ``is`` mutant
    (b35b62d5) counts them: the idle ones."""
    events = [Event(op="start", run=0), Event(op="start", run=1), Event(op="start", run=2)]
    outcome, _ = outcome_and_trace(pool_runner, events)
    assert not isinstance(outcome, str), outcome

    def idle_counted(supervisor: Supervisor) -> tuple[int, int]:
        workers = list(supervisor.workers.values())
        return len(workers), sum(w.lease is None for w in workers)

    monkeypatch.setattr(pool_world, "pool_counts", idle_counted)
    assert "[busy_gauge]" in _violation(pool_runner, events)
