"""The extension point for adapters: current_context() and ctx.effect(..., perform=...)."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from crashresume import Context, conform, current_context

from .subjects import AFTER, JOBS, MemoryStore, SeedAgent, at, expect


class FakeRemote:
    """Stands in for a library call that really acts (an HTTP client, a tool)."""

    def __init__(self) -> None:
        self.acted: Counter[str] = Counter()

    def charge(self, job: str) -> str:
        self.acted[job] += 1
        return f"ch_{job}_{self.acted[job]}"


def routed_charge(remote: FakeRemote, job: str, key: str | None) -> Any:
    """What an adapter inside another library does: route through the harness when present."""
    ctx = current_context()
    if ctx is None:
        return remote.charge(job)
    return ctx.effect("charge", job, key=key, perform=lambda: remote.charge(job))


def make_factory(remote: FakeRemote, *, keyed: bool) -> Any:
    stores: dict[str, MemoryStore] = {}

    class Agent(SeedAgent):
        def charge(self, job: str) -> Any:  # note: never touches self.ctx
            return routed_charge(remote, job, f"charge:{job}" if keyed else None)

    def make_agent(ctx: Context) -> Agent:
        return Agent(ctx, stores.setdefault(ctx.run_id, MemoryStore()))

    return make_agent


def test_outside_a_conform_run_there_is_no_current_context() -> None:
    assert current_context() is None
    assert routed_charge(FakeRemote(), "job-1", key="k") == "ch_job-1_1"


def test_inside_a_life_the_current_context_is_the_one_make_agent_got() -> None:
    seen: list[bool] = []

    class Agent:
        def __init__(self, ctx: Context) -> None:
            self.ctx = ctx

        def step(self, job: str) -> None:
            seen.append(current_context() is self.ctx)
            self.ctx.effect("charge", job)

    conform(Agent, inputs=JOBS)

    assert seen and all(seen)
    assert current_context() is None


def test_an_effect_routed_by_an_adapter_is_judged_like_any_other() -> None:
    remote = FakeRemote()

    assert conform(make_factory(remote, keyed=True), inputs=JOBS).passed
    # baselines: 3 jobs twice; 6 scenarios: each charges every job exactly once.
    assert remote.acted == {job: 2 + 6 for job in JOBS}

    report = conform(make_factory(FakeRemote(), keyed=False), inputs=JOBS)
    assert at(report.findings) == expect("duplicate_effect", AFTER)


def test_when_perform_raises_nothing_is_recorded_and_the_subject_sees_the_error() -> None:
    outcomes: list[str] = []

    class Agent:
        def __init__(self, ctx: Context) -> None:
            self.ctx = ctx

        def step(self, job: str) -> None:
            try:
                self.ctx.effect("charge", job, key=job, perform=self.fail)
            except ConnectionError as exc:
                outcomes.append(str(exc))
            self.ctx.effect("charge", job, key=job)  # same key: a first, real effect

        def fail(self) -> str:
            raise ConnectionError("remote down")

    report = conform(Agent, inputs=["a"], only="run")

    assert report.passed
    assert report.baseline_effects == 2
    assert outcomes == ["remote down", "remote down"]  # both baselines


@pytest.mark.parametrize("mode", ["inprocess", "process"])
def test_perform_runs_where_the_life_runs_and_its_result_is_the_effects_result(
    mode: str,
) -> None:
    results: list[Any] = []

    class Agent:
        def __init__(self, ctx: Context) -> None:
            self.ctx = ctx

        def step(self, job: str) -> None:
            results.append(self.ctx.effect("charge", job, perform=lambda: {"id": job}))

        def state(self) -> Any:
            return None

    report = conform(Agent, inputs=["a"], only="run", mode=mode)

    assert report.passed
    # In process mode the lives ran in children, so this process saw none of it.
    assert results == ([{"id": "a"}] * 2 if mode == "inprocess" else [])
