"""The contract of conform: factory calls, run ids, re-fed inputs, keyed effects, misuse."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from crashresume import BaselineError, Context, UsageError, conform

from .subjects import JOBS, MemoryStore, SeedAgent, factory


def test_the_seeds_example_agent_passes_every_crash_scenario() -> None:
    report = conform(factory(SeedAgent), inputs=JOBS)

    assert report.passed, str(report)
    assert report.findings == []
    assert report.baseline_effects == 3
    assert len(report.scenarios) == 6


def test_a_charge_resent_under_its_key_after_a_crash_gets_the_first_result_and_runs_once() -> None:
    asked: Counter[tuple[str, str]] = Counter()  # (run_id, job) -> effect calls
    executed: Counter[tuple[str, str]] = Counter()  # (run_id, job) -> real executions
    receipts: dict[tuple[str, str], list[Any]] = {}
    stores: dict[str, MemoryStore] = {}

    class Agent(SeedAgent):
        def charge(self, job: str) -> Any:
            run = self.ctx.run_id

            def perform() -> str:
                executed[run, job] += 1
                return f"receipt-{job}"

            asked[run, job] += 1
            receipt = self.ctx.effect("charge", job, key=f"charge:{job}", perform=perform)
            receipts.setdefault((run, job), []).append(receipt)
            return receipt

    def make_agent(ctx: Context) -> Agent:
        return Agent(ctx, stores.setdefault(ctx.run_id, MemoryStore()))

    # run-2: job-2 is charged, the process dies before saving it; the resume charges again.
    report = conform(make_agent, inputs=JOBS, only="run-2")

    assert report.passed, str(report)
    assert asked["run-2", "job-2"] == 2  # the dead life asked, and the resume asked again
    assert executed["run-2", "job-2"] == 1  # the remote acted once
    assert receipts["run-2", "job-2"] == ["receipt-job-2"]  # only the resume lived to see it
    assert executed["run-2", "job-1"] == executed["run-2", "job-3"] == 1


def test_make_agent_is_called_once_per_start_with_the_run_id_of_its_scenario() -> None:
    starts: list[str] = []
    make = factory(SeedAgent)

    def make_agent(ctx: Context) -> SeedAgent:
        starts.append(ctx.run_id)
        return make(ctx)

    report = conform(make_agent, inputs=["a", "b"])

    assert report.passed
    assert starts == [
        "run",  # the baseline
        "run-again",  # the baseline once more, to catch nondeterminism
        *["run-before-1"] * 2,  # the life that dies, and its resume
        *["run-1"] * 2,
        *["run-before-2"] * 2,
        *["run-2"] * 2,
    ]


def test_a_restarted_subject_is_fed_every_input_again_from_the_first() -> None:
    fed: dict[str, list[list[str]]] = {}
    make = factory(SeedAgent)

    class Recording:
        def __init__(self, ctx: Context) -> None:
            self.inner = make(ctx)
            self.seen: list[str] = []
            fed.setdefault(ctx.run_id, []).append(self.seen)

        def step(self, job: str) -> None:
            self.seen.append(job)
            self.inner.step(job)

    conform(Recording, inputs=JOBS, only="run-2")

    assert fed["run-2"] == [["job-1", "job-2"], JOBS]  # died during job-2, then all again


def test_a_subject_that_records_no_effect_passes_trivially_with_a_note() -> None:
    class Silent:
        def __init__(self, ctx: Context) -> None:
            self.seen: list[str] = []

        def step(self, item: str) -> None:
            self.seen.append(item)

    report = conform(Silent, inputs=JOBS)

    assert report.passed
    assert report.scenarios == []
    assert any("ctx.effect" in note for note in report.notes)
    assert "PASSED" in str(report)


def test_a_baseline_that_raises_is_an_error_not_a_finding() -> None:
    class Broken:
        def __init__(self, ctx: Context) -> None:
            self.ctx = ctx

        def step(self, job: str) -> None:
            self.ctx.effect("charge", job)
            raise ValueError(f"cannot handle {job}")

    with pytest.raises(BaselineError, match=r"ValueError: cannot handle job-1 \(at .*in step\)"):
        conform(Broken, inputs=JOBS)


@pytest.mark.parametrize(
    ("call", "advice"),
    [
        (lambda: conform(factory(), inputs="job-1"), r"did you mean inputs=\['job-1'\]"),
        (lambda: conform(factory(), inputs=3), "must be a list of inputs"),
        (lambda: conform(SeedAgent(None, MemoryStore()), inputs=JOBS), "Pass the factory"),  # type: ignore[arg-type]
        (lambda: conform(factory(), inputs=JOBS, crashes=0), "use 1"),
        (lambda: conform(factory(), inputs=JOBS, mode="thread"), "'inprocess', 'process'"),
        (lambda: conform(factory(), inputs=JOBS, only="run3"), "run-before-<k>"),
        (lambda: conform(factory(), inputs=JOBS, only="run-4"), "k from 1 to 3"),
        (lambda: conform(lambda ctx: object(), inputs=JOBS), "step\\(input\\) method"),
    ],
    ids=[
        "str-inputs",
        "int-inputs",
        "agent-not-factory",
        "crashes-0",
        "mode",
        "bad-id",
        "id-out-of-range",
        "no-step",
    ],
)
def test_misuse_raises_a_usage_error_that_says_how_to_fix_it(call: Any, advice: str) -> None:
    with pytest.raises(UsageError, match=advice):
        call()


def test_an_unhashable_key_is_a_usage_error_naming_a_better_key() -> None:
    class Agent:
        def __init__(self, ctx: Context) -> None:
            self.ctx = ctx

        def step(self, job: str) -> None:
            self.ctx.effect("charge", job, key=[job])

    with pytest.raises(UsageError, match="effect key \\['job-1'\\] is not hashable; use a string"):
        conform(Agent, inputs=JOBS)
