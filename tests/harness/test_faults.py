"""faults=[...]: an effect whose answer is lost, that fails before acting, or that lands late.

The subject's own retry path runs, and the invariants judge what it did.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from crashresume import Context, InjectedFault, UsageError, conform
from crashresume._context import ScenarioLog
from crashresume._faults import FAULTS, Fault, make_context
from crashresume._selftest import CASES, INPUTS, Case, FileStore, _found

from .subjects import JOBS, SeedAgent, SqliteAgent, UnkeyedAgent, UnkeyedSqliteAgent, factory


def _case(name: str) -> Case:
    return next(case for case in CASES if case.name == name)


@pytest.mark.parametrize("mode", ["inprocess", "process"])
def test_a_retry_without_the_key_passes_a_plain_crash_scan(mode: str) -> None:
    assert _found(_case("retry without the key, crashes only"), mode) == frozenset()


@pytest.mark.parametrize("mode", ["inprocess", "process"])
def test_a_retry_without_the_key_is_found_by_a_lost_answer_and_a_late_landing(mode: str) -> None:
    case = _case("retry without the key, faults too")

    assert _found(case, mode) == case.expected
    assert {scenario for scenario, _ in case.expected} == {
        f"run-{kind}-{k}" for kind in ("lost", "slow") for k in (1, 2, 3)
    }


def test_the_conforming_selftest_subject_passes_every_fault_without_any_retry() -> None:
    every = ("lost", "fail", "slow", "rate_limited", "malformed")
    conforming = Case(
        name="conforming",
        subject=_case("conforming agent").subject,
        expected=frozenset(),
        options=(("faults", every),),
    )
    assert _found(conforming, "inprocess") == frozenset()


# -- what each fault does at one effect call -------------------------------------------------


def _context(kind: str, call: int = 1) -> tuple[Context, ScenarioLog]:
    log = ScenarioLog()
    return make_context(Context, "run-x", log, None, Fault(kind=kind, call=call)), log


def test_a_lost_answer_acts_and_the_caller_gets_a_timeout() -> None:
    ctx, log = _context("lost", call=2)
    ctx.effect("charge", "a", key="k-a")

    with pytest.raises(TimeoutError) as caught:
        ctx.effect("charge", "b", key="k-b")

    assert isinstance(caught.value, InjectedFault) and caught.value.fault == "lost"
    assert log.performed == [("charge", "a"), ("charge", "b")]
    assert ctx.effect("charge", "b", key="k-b") == "charge#2"  # the retry gets the first answer
    assert log.performed == [("charge", "a"), ("charge", "b")]


@pytest.mark.parametrize("kind", ["fail", "rate_limited"])
def test_a_failure_before_acting_does_nothing_and_the_caller_gets_a_connection_error(
    kind: str,
) -> None:
    ctx, log = _context(kind)

    with pytest.raises(ConnectionError) as caught:
        ctx.effect("charge", "a", key="k-a")

    assert isinstance(caught.value, InjectedFault) and caught.value.fault == kind
    assert log.performed == []
    ctx.effect("charge", "a", key="k-a")
    assert log.performed == [("charge", "a")]


def test_a_malformed_answer_acts_and_the_caller_gets_a_value_error() -> None:
    ctx, log = _context("malformed")

    with pytest.raises(ValueError, match="garbled"):
        ctx.effect("charge", "a")

    assert log.performed == [("charge", "a")]


def test_a_slow_request_lands_after_the_caller_gave_up_right_before_its_next_call() -> None:
    ctx, log = _context("slow")

    with pytest.raises(TimeoutError):
        ctx.effect("charge", "a")
    assert log.performed == []  # still in flight: a check now finds nothing

    ctx.effect("charge", "a")  # the unkeyed retry
    assert log.performed == [("charge", "a"), ("charge", "a")]


def test_a_slow_request_lands_when_the_start_ends_if_no_call_follows() -> None:
    ctx, log = _context("slow")
    with pytest.raises(TimeoutError):
        ctx.effect("charge", "a", key="k-a")

    ctx._settle()

    assert log.performed == [("charge", "a")]
    assert log.remote["k-a"] == ("charge", "a", "charge#1")


def test_a_fault_hits_only_its_own_call_once() -> None:
    ctx, log = _context("fail", call=2)
    ctx.effect("charge", "a")
    with pytest.raises(ConnectionError):
        ctx.effect("charge", "b")
    ctx.effect("charge", "b")
    ctx.effect("charge", "c")
    assert log.performed == [("charge", "a"), ("charge", "b"), ("charge", "c")]


def test_an_async_effect_meets_its_fault_too() -> None:
    ctx, log = _context("lost")

    async def perform() -> str:
        return "done"

    with pytest.raises(TimeoutError):
        asyncio.run(ctx.effect_async("charge", "a", key="k-a", perform=perform))
    assert log.performed == [("charge", "a")]
    assert asyncio.run(ctx.effect_async("charge", "a", key="k-a", perform=perform)) == "done"


# -- what conform makes of them ----------------------------------------------------------------


class GivesUp(SeedAgent):
    """Bug: a charge that failed is logged and skipped, and the job counted as done."""

    def charge(self, job: str) -> Any:
        try:
            return super().charge(job)
        except ConnectionError:
            return None


def test_a_retry_that_gives_up_on_a_failure_is_effect_lost() -> None:
    report = conform(factory(GivesUp), inputs=JOBS, faults=["fail"])

    assert {(f.scenario, str(f.kind)) for f in report.findings} == {
        (f"run-fail-{k}", "effect_lost") for k in (1, 2, 3)
    }


def test_a_start_the_fault_ends_is_restarted_and_an_unkeyed_resend_is_a_plain_duplicate() -> None:
    report = conform(factory(UnkeyedAgent), inputs=JOBS, faults=["lost", "fail"])

    faulted = {(f.scenario, str(f.kind)) for f in report.findings if "-lost-" in f.scenario}
    assert faulted == {(f"run-lost-{k}", "duplicate_effect") for k in (1, 2, 3)}
    assert not [f for f in report.findings if "-fail-" in f.scenario]
    assert report.scenarios[-6:] == [
        f"run-{kind}-{k}" for k in (1, 2, 3) for kind in ("lost", "fail")
    ]


def test_a_keyed_subject_passes_every_fault_in_process_mode_with_workers_too(
    tmp_path: Path,
) -> None:
    def make_agent(ctx: Context) -> SqliteAgent:
        return SqliteAgent(ctx, tmp_path / f"{ctx.run_id}.db")

    report = conform(make_agent, inputs=JOBS, mode="process", workers=2, faults=list(FAULTS))

    assert report.passed, str(report)
    assert len(report.scenarios) == 6 + 5 * 3


def test_only_reruns_one_fault_scenario_and_the_report_says_what_happened() -> None:
    report = conform(factory(UnkeyedAgent), inputs=JOBS, faults=["lost"])
    finding = next(f for f in report.findings if f.scenario == "run-lost-1")
    assert finding.rerun.endswith("only='run-lost-1')")

    again = conform(factory(UnkeyedAgent), inputs=JOBS, only="run-lost-1")

    assert again.scenarios == ["run-lost-1"]
    assert again.findings == [finding]
    assert (
        "run-lost-1 (the first run met a fault: at effect call 1 the effect acted and its "
        "answer was lost (a timeout after the remote committed)):"
    ) in str(again)


@pytest.mark.parametrize(
    ("faults", "message"),
    [
        (
            "lost",
            "faults must be a list of fault kinds, not a single str; did you mean faults=['lost']?",
        ),
        (
            ["lost", "late"],
            "faults: 'late' is not a fault kind; use any of 'lost', 'fail', "
            "'slow', 'rate_limited', 'malformed'",
        ),
        (3, "faults must be a list of fault kinds; got 'int'"),
    ],
)
def test_bad_faults_are_refused_with_what_to_give_instead(faults: Any, message: str) -> None:
    with pytest.raises(UsageError) as caught:
        conform(factory(), inputs=JOBS, faults=faults)
    assert message in str(caught.value)


def test_only_naming_a_fault_beyond_the_baseline_is_refused() -> None:
    with pytest.raises(
        UsageError,
        match=r"only='run-slow-4' names effect call 4, but the "
        r"baseline made 3 effect call\(s\)",
    ):
        conform(factory(), inputs=JOBS, only="run-slow-4")


def test_the_hypothesis_mode_draws_faults_and_its_finding_reruns_with_only(tmp_path: Path) -> None:
    pytest.importorskip("hypothesis")
    case = _case("retry without the key, faults too")

    def fresh(folder: Path) -> Any:  # every conform call gets fresh stores
        folder.mkdir()
        return lambda ctx: case.subject(ctx, FileStore(folder / f"{ctx.run_id}.json"))

    report = conform(
        fresh(tmp_path / "search"),
        inputs=list(INPUTS),
        faults=["lost"],
        explore="hypothesis",
        max_examples=40,
        seed=7,
        database=None,
    )

    assert [str(f.kind) for f in report.findings] == ["retry_duplicated"]
    scenario = report.findings[0].scenario
    assert scenario.startswith("run-lost-")
    again = conform(fresh(tmp_path / "rerun"), inputs=list(INPUTS), only=scenario)
    assert again.findings == report.findings


@pytest.mark.parametrize("mode", ["inprocess", "process"])
def test_a_slow_request_of_a_start_that_died_of_it_lands_before_the_restart(
    mode: str, tmp_path: Path
) -> None:
    def make_agent(ctx: Context) -> UnkeyedSqliteAgent:
        return UnkeyedSqliteAgent(ctx, tmp_path / f"{ctx.run_id}.db")

    report = conform(make_agent, inputs=JOBS, mode=mode, faults=["slow"])

    slow = {(f.scenario, str(f.kind)) for f in report.findings if "-slow-" in f.scenario}
    # The late charge and the restart's are two; the state keeps the restart's receipt.
    assert slow == {
        (f"run-slow-{k}", kind)
        for k in (1, 2, 3)
        for kind in ("duplicate_effect", "resume_diverged")
    }
