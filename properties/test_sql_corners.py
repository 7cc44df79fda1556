"""The journal's statements where two writers meet, or a writer comes late
(``properties/sql_corners.py``): they hold, and each SQL slip that outlived every schedule
until 2026-12-07 is caught."""

from __future__ import annotations

import pytest

from .planting import plant_sql
from .runners import InProcessRunner
from .sql_corners import check_races


def test_the_statements_hold_where_writers_meet(runner: InProcessRunner) -> None:
    assert check_races(runner) == []


@pytest.mark.parametrize(
    ("mutant", "said"),
    [
        ("operator.sql:operator_cancel_run:drop_lock:25949f66", "a cancel that waited"),
        ("operator.sql:operator_retry_run:drop_lock:25949f66", "a retry that waited"),
        ("queries.sql:give_up_exhausted:drop_lock:d3915155", "a give-up beside"),
        ("queries.sql:give_up_exhausted:drop_lock:f7b7edee", "a give-up beside"),
        ("queries.sql:record_send:drop_conjunct:578d551a", "could still send"),
        ("queries.sql:landing_wait:drop_conjunct:62c63275", "could still look"),
        ("queries.sql:park_run:drop_conjunct:d7e1dafa", "could still park"),
        ("queries.sql:adopt_lease:drop_conjunct:578d551a", "could still adopt"),
        ("queries.sql:claim_run:drop_conjunct:c15a8e61", "a claim that proved the claimer"),
        ("queries.sql:adopt_lease:drop_conjunct:94c11260", "a worker adopted generation 1"),
        ("queries.sql:expire_lease_of:drop_conjunct:6e6994e4", "a release of generation 1"),
        ("queries.sql:landing_wait:drop_conjunct:ffb6a417", "two runs' calls at one step"),
        ("operator.sql:operator_resolve_call:drop_conjunct:4e25db5d", "a resolve of a settled"),
        ("operator.sql:operator_resolve_call:drop_conjunct:3501f9ff", "a resolve of a settled"),
        ("operator.sql:operator_resolve_call:drop_conjunct:ad3368a1", "a resolve of a failed"),
        ("queries.sql:held_runs:drop_conjunct:63aab4a7", "the watchdog raised TypeError"),
        ("queries.sql:held_runs:left_join:dbd47fa0", "the watchdog raised KeyError"),
    ],
)
def test_a_slip_where_writers_meet_is_caught(
    runner: InProcessRunner, monkeypatch: pytest.MonkeyPatch, mutant: str, said: str
) -> None:
    plant_sql(monkeypatch, f"sql/{mutant}")
    assert said in "\n".join(check_races(runner))
