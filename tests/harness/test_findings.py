"""Each finding kind appears in exactly the scenarios where the bug bites, and says so."""

from __future__ import annotations

import dataclasses
import itertools
import json
from typing import Any

import pytest

from crashresume import Context, Finding, FindingKind, conform

from .subjects import (
    AFTER,
    BEFORE,
    JOBS,
    UNKEYED_STORES,
    MemoryStore,
    SavesFirstAgent,
    SeedAgent,
    UnkeyedAgent,
    at,
    expect,
    factory,
    make_seed_agent,
    make_unkeyed_agent,
)


def test_a_charge_without_key_is_a_duplicate_effect_exactly_where_it_died_after_the_charge() -> (
    None
):
    report = conform(factory(UnkeyedAgent), inputs=JOBS)

    assert at(report.findings) == expect("duplicate_effect", AFTER)
    by_scenario = {finding.scenario: finding for finding in report.findings}
    assert by_scenario["run-2"].message == "charge('job-2') happened 2 times, once in the baseline"


def test_saving_progress_before_the_charge_loses_the_charge_when_it_dies_in_between() -> None:
    report = conform(factory(SavesFirstAgent), inputs=JOBS)

    assert at(report.findings) == expect("effect_lost", BEFORE)
    by_scenario = {finding.scenario: finding for finding in report.findings}
    assert by_scenario["run-before-3"].message == (
        "charge('job-3') never happened, once in the baseline"
    )


def test_a_key_reused_with_other_arguments_is_a_key_conflict() -> None:
    stores: dict[str, MemoryStore] = {}

    class Agent(SeedAgent):
        def charge(self, job: str) -> Any:
            retry = job in self.store.load("inflight")
            self.store.save("inflight", {job})
            amount = 12 if retry else 10  # the retry recomputes the amount, wrongly
            return self.ctx.effect("charge", {"job": job, "amount": amount}, key=f"charge:{job}")

    def make_agent(ctx: Context) -> Agent:
        return Agent(ctx, stores.setdefault(ctx.run_id, MemoryStore()))

    report = conform(make_agent, inputs=JOBS, only="run-2")

    assert at(report.findings) == {("run-2", "key_conflict")}
    assert report.findings[0].message == (
        "key 'charge:job-2' was first sent with charge({'amount': 10, 'job': 'job-2'}), "
        "then with charge({'amount': 12, 'job': 'job-2'}); the remote answered with the first "
        "result and ignored the new arguments"
    )


def test_a_key_conflict_without_any_crash_is_reported_once_for_the_baseline() -> None:
    class Agent:
        def __init__(self, ctx: Context) -> None:
            self.ctx = ctx

        def step(self, job: str) -> None:
            self.ctx.effect("charge", job, key="charge")  # one key for every job

    report = conform(Agent, inputs=JOBS)

    assert at(report.findings) == {("run", "key_conflict")}
    assert report.findings[0].message.startswith("without any crash: key 'charge' was first")


def test_progress_kept_only_in_memory_is_state_lost_once_a_step_had_completed() -> None:
    class Forgetful(SeedAgent):
        def step(self, job: str) -> None:
            if job not in self.done:
                self.charge(job)
                self.done.add(job)  # never saved

        def state(self) -> set[str]:
            return set(self.done)

    report = conform(factory(Forgetful), inputs=JOBS)

    # Dying during job-1 leaves nothing that should have survived; later it does.
    assert at(report.findings) == expect(
        "state_lost", {"run-2", "run-3", "run-before-2", "run-before-3"}
    )
    by_scenario = {finding.scenario: finding for finding in report.findings}
    assert by_scenario["run-3"].message == (
        "state() was empty right after restart 1, although the crashed run had finished "
        "2 inputs, after which the baseline's state() was not empty"
    )


def test_a_final_state_that_differs_from_the_baseline_is_resume_diverged() -> None:
    counters: dict[str, dict[str, int]] = {}

    class CountsTwice(SeedAgent):
        def step(self, job: str) -> None:
            self.charge(job)  # keyed, so re-sending is harmless; counting again is not
            counter = counters.setdefault(self.ctx.run_id, {"processed": 0})
            counter["processed"] += 1

        def state(self) -> dict[str, int]:
            return dict(counters.get(self.ctx.run_id, {"processed": 0}))

    report = conform(factory(CountsTwice), inputs=JOBS)

    assert at(report.findings) == expect(
        "resume_diverged", {"run-2", "run-3", "run-before-2", "run-before-3"}
    )
    by_scenario = {finding.scenario: finding for finding in report.findings}
    assert by_scenario["run-3"].message == (
        "the final state() after the resume differs: ['processed'] is 5, baseline 3"
    )


def test_a_resume_that_raises_is_resume_crashed_and_nothing_else() -> None:
    stores: dict[str, MemoryStore] = {}

    class Refuses(SeedAgent):
        def __init__(self, ctx: Context, store: MemoryStore) -> None:
            super().__init__(ctx, store)
            if ctx.run_id != "run" and store.data.get("started"):
                raise RuntimeError("refusing to resume")
            store.data["started"] = True

    def make_agent(ctx: Context) -> Refuses:
        return Refuses(ctx, stores.setdefault(ctx.run_id, MemoryStore()))

    report = conform(make_agent, inputs=JOBS)

    assert at(report.findings) == expect("resume_crashed", AFTER | BEFORE)
    assert report.findings[0].message.startswith(
        "resume 1 raised: RuntimeError: refusing to resume (at "
    )


def test_two_baselines_that_differ_are_nondeterministic_and_no_crash_scenario_runs() -> None:
    counter = itertools.count()

    class Clocked(SeedAgent):
        def charge(self, job: str) -> Any:
            return self.ctx.effect("charge", (job, next(counter)), key=f"charge:{job}")

    report = conform(factory(Clocked), inputs=JOBS)

    assert at(report.findings) == {("run", "nondeterministic_baseline")}
    assert report.scenarios == []
    assert "new effect 1 was charge(('job-1', 0)) in 'run' but charge(('job-1', 3))" in (
        report.findings[0].message
    )
    assert any("skipped" in note for note in report.notes)


def test_a_state_that_differs_between_baselines_is_nondeterministic_too() -> None:
    counter = itertools.count()

    class Stamped(SeedAgent):
        def state(self) -> dict[str, Any]:
            return {"done": super().state(), "run": next(counter) // 4}

    report = conform(factory(Stamped), inputs=JOBS)

    assert at(report.findings) == {("run", "nondeterministic_baseline")}
    assert "the final state() differs" in report.findings[0].message


def test_every_finding_carries_a_rerun_line_that_reproduces_exactly_that_finding() -> None:
    report = conform(make_unkeyed_agent, inputs=JOBS)
    finding = next(f for f in report.findings if f.scenario == "run-2")

    assert (
        finding.rerun
        == "conform(make_unkeyed_agent, inputs=['job-1', 'job-2', 'job-3'], only='run-2')"
    )
    assert finding.rerun_cli == (
        "crashresume check tests.harness.subjects:make_unkeyed_agent "
        "--inputs job-1 job-2 job-3 --only run-2"
    )
    UNKEYED_STORES.clear()  # durable state must be fresh for every conform call
    again = conform(make_unkeyed_agent, inputs=JOBS, only=finding.scenario)
    assert again.scenarios == ["run-2"]
    assert again.findings == [finding]


def test_rerun_hints_stay_short_for_long_or_non_string_inputs() -> None:
    report = conform(
        factory(UnkeyedAgent), inputs=[f"job-{i}" for i in range(40)], mode="inprocess"
    )
    finding = report.findings[0]
    assert finding.rerun == "conform(make_agent, inputs=inputs, only='run-1')  # the same 40 inputs"
    assert finding.rerun_cli.startswith("crashresume check MODULE:FACTORY --inputs <the same 40")

    numbers = conform(factory(UnkeyedAgent), inputs=[1, 2]).findings[0]
    assert "use the Python call" in numbers.rerun_cli


def test_findings_are_frozen_keyword_only_dataclasses() -> None:
    finding = conform(factory(UnkeyedAgent), inputs=JOBS).findings[0]

    assert isinstance(finding, Finding)
    assert finding.kind is FindingKind.DUPLICATE_EFFECT
    assert finding.kind == "duplicate_effect"
    with pytest.raises(dataclasses.FrozenInstanceError):
        finding.scenario = "run-9"  # type: ignore[misc]
    with pytest.raises(TypeError):
        Finding(FindingKind.EFFECT_LOST, "run-1", "m", "r", "c")  # type: ignore[misc]


def test_the_json_report_holds_every_finding_with_its_rerun_lines() -> None:
    report = conform(factory(UnkeyedAgent), inputs=JOBS)

    data = json.loads(report.to_json())

    assert data["passed"] is False
    assert data["baseline_effects"] == 3
    assert data["scenarios"] == [
        "run-before-1",
        "run-1",
        "run-before-2",
        "run-2",
        "run-before-3",
        "run-3",
    ]
    assert [f["scenario"] for f in data["findings"]] == ["run-1", "run-2", "run-3"]
    assert data["findings"][0] == {
        "kind": "duplicate_effect",
        "scenario": "run-1",
        "message": "charge('job-1') happened 2 times, once in the baseline",
        "rerun": "conform(make_agent, inputs=['job-1', 'job-2', 'job-3'], only='run-1')",
        "rerun_cli": "crashresume check MODULE:FACTORY --inputs job-1 job-2 job-3 --only run-1",
    }


def test_the_text_report_groups_findings_by_kind_with_scenario_words_and_rerun_lines() -> None:
    text = str(conform(factory(UnkeyedAgent), inputs=JOBS))

    assert text.splitlines()[0] == (
        "crashresume: FAILED: make_agent over 3 inputs, 3 findings in 6 crash scenarios "
        "(3 effect calls in the baseline, crashes=1, mode=inprocess)"
    )
    assert "\nduplicate_effect: 3 scenarios\n" in text
    assert "  run-2 (the first run died right after effect call 2):\n" in text
    assert "    charge('job-2') happened 2 times, once in the baseline\n" in text
    assert (
        "    rerun: conform(make_agent, inputs=['job-1', 'job-2', 'job-3'], only='run-2')\n" in text
    )
    assert "run-before-<k> = died right before effect call k" in text


def test_a_passing_report_prints_one_line() -> None:
    text = str(conform(make_seed_agent, inputs=JOBS))

    assert text == (
        "crashresume: PASSED: make_seed_agent over 3 inputs, no findings in 6 crash scenarios "
        "(3 effect calls in the baseline, crashes=1, mode=inprocess)"
    )


def test_a_long_report_prints_the_first_findings_of_a_kind_and_counts_the_rest() -> None:
    report = conform(factory(UnkeyedAgent), inputs=[f"job-{i}" for i in range(8)])
    text = str(report)

    assert len(report.findings) == 8
    assert text.count("    rerun: ") == 5
    assert "  ... and 3 more duplicate_effect (report.findings and report.to_json()" in text
