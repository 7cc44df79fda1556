"""An operator's retry, as the runtime promises it: a failed run goes back to pending, a
free one keeps its status, and one a worker holds under a live lease is refused.

``operator_retry_run``'s guard and its status ``CASE`` had four surviving mutants in the
2026-12-06 run (93a3d37c, d2107933, a5593ca2: a live lease's run retried from under its
worker; ecb2974e: a failed run retried stays failed): the suite's operator retried only
runs it was right to, and nothing read the status a retry left. The one-cell story
``retried`` retries a run that failed for good, then while its next worker holds it; the
``retried`` check holds the status to the rule, and refuses a retry of a run whose lease
was live when the operator asked.
"""

from __future__ import annotations

import pytest

from .planting import failure, plant_sql
from .runners import InProcessRunner
from .scope import story

RETRY = "sql/operator.sql:operator_retry_run"
# a live lease's run retried: said at the retry (until 2026-12-06 only by the worker's
# failure the retry had fenced, which the oracle then wrongly wanted recorded)
HELD = "[retried] run r0: an operator's retry took the run from "


def test_a_failed_run_is_retried_and_a_held_one_is_not(runner: InProcessRunner) -> None:
    assert failure(runner, story("provisioning", "retried", "", 0)) == ""

    assert "retry r0: retried (was failed, now pending)" in runner.trace
    assert "retry r0: refused: the run is held by a live lease" in runner.trace


@pytest.mark.parametrize(
    ("mutant", "said"),
    [
        ("drop_conjunct:93a3d37c", HELD),
        ("flip_comparison:d2107933", HELD),
        ("flip_comparison:a5593ca2", HELD),
        ("flip_comparison:ecb2974e", "[retried] run r0: an operator's retry of a failed run"),
    ],
)
def test_a_retry_that_breaks_the_rule_is_caught(
    runner: InProcessRunner, monkeypatch: pytest.MonkeyPatch, mutant: str, said: str
) -> None:
    plant_sql(monkeypatch, f"{RETRY}:{mutant}")

    assert said in failure(runner, story("provisioning", "retried", "", 0))


def test_a_retry_a_database_crash_takes_back_is_caught(
    runner: InProcessRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An operator's retry is durable (ARCHITECTURE's table); committed relaxed (7898aa3c)
    the crash right after it takes it back."""
    events = story("provisioning", "retried_db_crash", "", 0)
    assert failure(runner, events) == ""
    plant_sql(monkeypatch, f"{RETRY}:relax_commit:7898aa3c")

    assert "[lost_state] run r0: an operator's retry" in failure(runner, events)


def test_an_operators_decision_on_a_running_runs_call_is_refused(
    runner: InProcessRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``resolve --confirm`` while the worker still drives the run (paused after its
    intent): refused. ``operator_resolve_call`` without its status conjunct (3686ee73,
    2026-12-06) accepted it: the suite's operator used to skip a run not parked."""
    events = story("once", "resolve_running", "", 2)
    assert failure(runner, events) == ""
    assert "resolve r0 --confirm: refused: the run is running" in runner.trace
    plant_sql(monkeypatch, "sql/operator.sql:operator_resolve_call:drop_conjunct:3686ee73")

    assert "[resolve_refused] run r0 step 2: an operator's --confirm" in failure(runner, events)


def test_a_redo_while_the_send_may_still_land_is_refused(
    runner: InProcessRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The once call's send is held at the desk and the run parks; an operator's redo now
    could send it twice (f30f767d, ``operator_resolve_call`` without its in-flight test,
    2026-12-06: the suite's redos all came after the bound)."""
    events = story("once", "redo_in_flight", "", 2)
    assert failure(runner, events) == ""
    assert "resolve r0 --redo: skipped (r0:2 may still land)" in runner.trace
    plant_sql(monkeypatch, "sql/operator.sql:operator_resolve_call:drop_conjunct:f30f767d")

    assert "[duplicate_effect] run r0: r0:2 acted 2 times" in failure(runner, events)
