"""faults=[...]: an effect whose answer is lost, that fails before acting, or that lands late.

The subject's own retry path runs, and the invariants judge what it did.
"""

from __future__ import annotations

import pytest

from crashresume._selftest import CASES, Case, _found


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
