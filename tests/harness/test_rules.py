"""expect= and at_most_once=: absolute rules, checked in the baseline and in every scenario."""

from __future__ import annotations

from typing import Any

import pytest

from crashresume import Context, UsageError, conform

from .subjects import JOBS, MemoryStore, SeedAgent, UnkeyedAgent, factory

ORDERS = ["o-1", "o-2", "o-3"]


class ExtraResume(SeedAgent):
    """Bug in every run: the second approval of a start resumes its node once too often, so
    that order's invoice goes out twice (LangGraph "interrupt() in a loop causes extra
    resumes"). The count lives in memory, so a restart moves the extra invoice elsewhere."""

    def __init__(self, ctx: Context, store: MemoryStore) -> None:
        super().__init__(ctx, store)
        self.approvals = 0

    def charge(self, job: str) -> Any:
        self.ctx.effect("send_invoice", job)
        self.approvals += 1
        if self.approvals == 2:
            self.ctx.effect("send_invoice", job)


def test_a_bug_in_every_run_is_broken_rule_under_run_and_nothing_else() -> None:
    # Compared with the buggy baseline, a crash that moves the extra invoice looks lost.
    assert "effect_lost" in conform(factory(ExtraResume), inputs=ORDERS).kinds()

    report = conform(factory(ExtraResume), inputs=ORDERS, expect={"send_invoice": 3})

    assert [(f.scenario, str(f.kind)) for f in report.findings] == [("run", "rule_broken")]
    assert report.findings[0].message == (
        "without any crash: send_invoice happened 4 times, expect={'send_invoice': 3} wants 3 times"
    )


class ChargesTwice(SeedAgent):
    """Bug in every run: each job is charged under two different keys."""

    def charge(self, job: str) -> Any:
        self.ctx.effect("charge", job, key=f"charge:{job}")
        return self.ctx.effect("charge", job, key=f"charge:{job}:again")


def test_at_most_once_reports_a_double_charge_the_baseline_comparison_passes() -> None:
    assert conform(factory(ChargesTwice), inputs=JOBS).passed

    report = conform(factory(ChargesTwice), inputs=JOBS, at_most_once=["charge"])

    assert [(f.scenario, str(f.kind)) for f in report.findings] == [("run", "rule_broken")]
    assert "charge('job-1') happened 2 times; charge('job-2') happened 2 times" in (
        report.findings[0].message
    )


def test_a_rule_the_baseline_keeps_is_checked_in_every_scenario() -> None:
    report = conform(factory(UnkeyedAgent), inputs=JOBS, at_most_once=["charge"])

    broken = {f.scenario for f in report.findings if f.kind == "rule_broken"}
    assert broken == {"run-1", "run-2", "run-3"}
    message = next(f.message for f in report.findings if f.kind == "rule_broken")
    assert message == "charge('job-1') happened 2 times, at_most_once=['charge'] allows once"


@pytest.mark.parametrize(
    ("rule", "message"),
    [
        (lambda effects: len(effects) <= 2 or "3 charges, at most 2", "3 charges, at most 2"),
        (lambda effects: len(effects) <= 2, "returned False for the effect log"),
    ],
)
def test_a_callable_rule_judges_the_whole_effect_log(rule: Any, message: str) -> None:
    report = conform(factory(), inputs=JOBS, expect=rule)

    assert [(f.scenario, str(f.kind)) for f in report.findings] == [("run", "rule_broken")]
    assert message in report.findings[0].message


def test_a_callable_rule_may_assert_and_sees_the_effects_in_order() -> None:
    seen: list[list[Any]] = []

    def no_duplicate_charges(effects: list[tuple[str, Any]]) -> None:
        seen.append(effects)
        args = [arg for name, arg in effects if name == "charge"]
        assert len(args) == len(set(args)), f"charged twice: {args}"

    report = conform(factory(UnkeyedAgent), inputs=JOBS, expect=no_duplicate_charges)

    assert seen[0] == [("charge", job) for job in JOBS]
    broken = {f.scenario: f.message for f in report.findings if f.kind == "rule_broken"}
    assert set(broken) == {"run-1", "run-2", "run-3"}
    assert broken["run-1"] == (
        "expect=no_duplicate_charges: charged twice: ['job-1', 'job-1', 'job-2', 'job-3']"
    )


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"expect": 3}, "expect=3: give expect={'effect name': count, ...} or a function"),
        ({"expect": {"charge": -1}}, "expect['charge']=-1: give how many charge effects"),
        ({"expect": {"charge": True}}, "expect['charge']=True: give how many charge effects"),
        ({"expect": {1: 2}}, "expect: the key 1 is not an effect name"),
        ({"at_most_once": "charge"}, "did you mean at_most_once=['charge']?"),
        ({"at_most_once": [1]}, "at_most_once: 1 is not an effect name"),
        ({"expect": lambda effects: 5}, "returned 5; a rule returns None or True when the log"),
    ],
)
def test_bad_rules_are_refused_with_what_to_give_instead(
    arguments: dict[str, Any], message: str
) -> None:
    with pytest.raises(UsageError) as caught:
        conform(factory(), inputs=JOBS, **arguments)
    assert message in str(caught.value)


def test_rules_hold_in_the_hypothesis_mode_too() -> None:
    pytest.importorskip("hypothesis")
    report = conform(
        factory(UnkeyedAgent),
        inputs=JOBS,
        at_most_once=["charge"],
        explore="hypothesis",
        max_examples=20,
        seed=3,
        database=None,
    )

    assert "rule_broken" in report.kinds()


def test_the_rerun_line_carries_the_rules_and_reproduces_the_finding() -> None:
    report = conform(factory(UnkeyedAgent), inputs=JOBS, at_most_once=["charge"])
    finding = next(f for f in report.findings if f.kind == "rule_broken")

    assert finding.rerun == (
        "conform(make_agent, inputs=['job-1', 'job-2', 'job-3'], only='run-1', "
        "at_most_once=['charge'])"
    )
    again = conform(factory(UnkeyedAgent), inputs=JOBS, only="run-1", at_most_once=["charge"])
    assert finding in again.findings
