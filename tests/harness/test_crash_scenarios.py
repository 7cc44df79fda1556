"""Where the harness kills the subject: before and after each effect, and twice with crashes=2."""

from __future__ import annotations

import uuid
from collections import Counter
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from crashresume import Context, SimulatedCrash, conform

from .subjects import AFTER, JOBS, MemoryStore, SeedAgent, UnkeyedAgent, at, expect, factory


def test_the_default_plan_dies_before_and_after_every_effect_call_in_order() -> None:
    report = conform(factory(SeedAgent), inputs=["a", "b"])

    assert report.crashes == 1
    assert report.scenarios == ["run-before-1", "run-1", "run-before-2", "run-2"]


def test_before_means_the_effect_never_happened_and_after_means_it_did() -> None:
    first_life: dict[str, list[str]] = {}  # run_id -> jobs the remote did for the first start
    starts: Counter[str] = Counter()
    stores: dict[str, MemoryStore] = {}

    class Agent(SeedAgent):
        def charge(self, job: str) -> Any:
            life = starts[self.ctx.run_id]

            def perform() -> str:
                if life == 1:
                    first_life.setdefault(self.ctx.run_id, []).append(job)
                return job

            return self.ctx.effect("charge", job, key=job, perform=perform)

    def make_agent(ctx: Context) -> Agent:
        starts[ctx.run_id] += 1
        return Agent(ctx, stores.setdefault(ctx.run_id, MemoryStore()))

    conform(make_agent, inputs=JOBS)

    assert first_life["run-before-2"] == ["job-1"]  # died before job-2's charge
    assert first_life["run-2"] == ["job-1", "job-2"]  # died after it


def test_crashes_2_also_dies_at_every_boundary_of_each_recovery() -> None:
    report = conform(factory(SeedAgent), inputs=["a", "b"], crashes=2)

    assert report.passed, str(report)
    # The recovery of run-1 charges a (a replay) and b: two calls, four more points.
    # The recovery of run-2 only replays b: one call, two more points.
    assert report.scenarios == [
        "run-before-1",
        *[f"run-before-1-then-{p}" for p in ("before-1", "1", "before-2", "2")],
        "run-1",
        *[f"run-1-then-{p}" for p in ("before-1", "1", "before-2", "2")],
        "run-before-2",
        *[f"run-before-2-then-{p}" for p in ("before-1", "1")],
        "run-2",
        *[f"run-2-then-{p}" for p in ("before-1", "1")],
    ]


class PendingNonce(SeedAgent):
    """Remembers the key of an in-flight charge so a retry reuses it, but its recovery forgets
    the pending record before re-sending: only a second crash in the recovery exposes it."""

    def __init__(self, ctx: Context, store: MemoryStore) -> None:
        super().__init__(ctx, store)
        self.pending = store.data.pop("pending", None)  # bug: dropped before the re-send

    def charge(self, job: str) -> Any:
        if self.pending is not None and self.pending[0] == job:
            nonce = self.pending[1]
        else:
            nonce = uuid.uuid4().hex
            self.store.data["pending"] = (job, nonce)
        return self.ctx.effect("charge", job, key=f"charge:{job}:{nonce}")


def test_a_bug_in_the_recovery_path_is_caught_only_with_crashes_2() -> None:
    assert conform(factory(PendingNonce), inputs=JOBS).passed

    report = conform(factory(PendingNonce), inputs=JOBS, crashes=2)

    assert {kind for _, kind in at(report.findings)} == {"duplicate_effect"}
    assert ("run-2-then-before-1", "duplicate_effect") in at(report.findings)
    assert all("-then-" in finding.scenario for finding in report.findings)


def test_only_runs_a_single_scenario_even_a_chained_one() -> None:
    report = conform(factory(PendingNonce), inputs=JOBS, only="run-2-then-before-1")

    assert report.scenarios == ["run-2-then-before-1"]
    assert at(report.findings) == {("run-2-then-before-1", "duplicate_effect")}


def test_only_run_runs_just_the_two_baselines() -> None:
    report = conform(factory(UnkeyedAgent), inputs=JOBS, only="run")

    assert report.passed
    assert report.scenarios == []


def test_a_crash_point_the_resume_never_reaches_is_noted() -> None:
    report = conform(factory(SeedAgent), inputs=JOBS, only="run-3-then-5")

    assert report.passed
    assert report.notes == [
        "run-3-then-5: the crash point was never reached (that life made only 1 effect call)"
    ]


def test_the_crash_is_a_base_exception_that_except_exception_cannot_swallow() -> None:
    assert issubclass(SimulatedCrash, BaseException)
    assert not issubclass(SimulatedCrash, Exception)

    class Careless(UnkeyedAgent):
        def step(self, job: str) -> None:
            if job in self.done:
                return
            try:
                self.charge(job)
            except Exception:
                return  # would "survive" a crash that was an Exception, and save nothing
            self.done.add(job)
            self.store.save("done", self.done)

    report = conform(factory(Careless), inputs=JOBS)

    # Had the crash been swallowed the life would go on; it dies, so re-sends duplicate.
    assert at(report.findings) == expect("duplicate_effect", AFTER)
    assert report.notes == []


def test_a_subject_that_catches_the_crash_anyway_gets_a_note_and_its_life_still_ends() -> None:
    class Stubborn(SeedAgent):
        def step(self, job: str) -> None:
            try:
                super().step(job)
            except BaseException:  # the mistake under test
                self.caught += 1

        caught = 0

    report = conform(factory(Stubborn), inputs=JOBS, only="run-before-2")

    assert report.passed, str(report)
    assert len(report.notes) == 1
    assert report.notes[0].startswith(
        "run-before-2: the subject caught the injected SimulatedCrash instead of dying"
    )


job_lists = st.lists(st.text("abcxyz", min_size=1, max_size=3), min_size=1, max_size=6, unique=True)


@settings(max_examples=40, deadline=None)
@given(jobs=job_lists)
def test_for_any_jobs_the_seed_agent_passes_and_the_unkeyed_one_duplicates_after_each(
    jobs: list[str],
) -> None:
    assert conform(factory(SeedAgent), inputs=jobs).passed

    report = conform(factory(UnkeyedAgent), inputs=jobs)

    assert at(report.findings) == expect(
        "duplicate_effect", {f"run-{k}" for k in range(1, len(jobs) + 1)}
    )
