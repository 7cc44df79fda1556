"""A worker whose run an operator took while it stood at a gate (a cancel, or a retry of
a run whose hung worker's lease had lapsed): every write it makes afterwards is refused,
its stop included, and the oracle judges it by the operator's fence, not by the stop it
would have made as the run's owner."""

from __future__ import annotations

import pytest

from .events import Event, Schedule, ScheduleError
from .hung_stories import HUNG_AT
from .planting import failure, plant_sql
from .runners import InProcessRunner, ProcessRunner
from .scope_stories import RETRY_AT, retried

BAD_ANSWER = (
    Event(op="configure", setting="max_bad_answers", n=0),
    Event(op="model_fault", fault="invalid_args", n=1),
    Event(op="start", run=0),
)
# the worker journaled an answer with an invalid call (one more than it may show the
# model), then an operator cancelled the run; woken, it stops with TooManyBadAnswers and
# its failure is refused: the run stays cancelled (found by the ci profile under another
# name, 2026-12-06: the oracle wanted the run failed)
CANCELLED = (
    *BAD_ANSWER,
    Event(op="pause", run=0, point="after_decide"),
    Event(op="cancel", run=0),
)


def test_a_worker_stopped_after_an_operators_cancel_leaves_the_run_cancelled(
    inprocess_runner: InProcessRunner,
) -> None:
    assert failure(inprocess_runner, CANCELLED) == ""
    assert inprocess_runner.trace[-1] == "settle r0: w1 ended: TooManyBadAnswers"
    assert inprocess_runner.replay(CANCELLED)["r0"]["status"] == "cancelled"


@pytest.mark.parametrize("how", sorted(HUNG_AT))
def test_a_hung_worker_woken_after_an_operators_retry_records_nothing(
    inprocess_runner: InProcessRunner, how: str
) -> None:
    kind, seq = RETRY_AT[how]
    events = retried(kind, how, seq)
    assert failure(inprocess_runner, events) == ""
    woken = next(line for line in inprocess_runner.trace if line.startswith("resume r0"))
    ended = {"hung_failed": "TooManyBadAnswers", "hung_released": "RemoteUnavailable"}
    worker = "w3" if how == "hung_redoing" else "w1"  # w1 died, w2 parked the run
    assert woken == f"resume r0: {worker} ended: {ended.get(how, 'LeaseLost')}"


RETRIED = "after an operator's retry took its run (generation 1), yet the run is"
WRITTEN = (
    "[operator_fence] run r0: an operator retried the run under its worker of generation 1 "
    "(the owner cleared), yet before any claim "
)


@pytest.mark.parametrize(
    ("how", "mutant", "said"),
    [
        ("hung_failed", "fail_run:drop_conjunct:d7e1dafa",
         f"[operator_fence] run r0 step 0: w1 stopped with TooManyBadAnswers {RETRIED} failed"),
        ("hung_released", "release_run:drop_conjunct:d7e1dafa",
         f"[operator_fence] run r0 step 0: w1 stopped with RemoteUnavailable {RETRIED} "
         "running, owned by None, failure 'RemoteUnavailable: "),
        ("hung_finished", "finish_run:drop_conjunct:d7e1dafa",
         "[worker] run r0 step 3: w1 stopped with done"),
        ("hung_asking", "check_owner:drop_conjunct:75d2904b",
         f"{WRITTEN}the model was asked (2 calls)"),
        ("hung_answered", "record_decision:drop_conjunct:578d551a",
         f"{WRITTEN}decision seq=1 (create_database) was written"),
        ("hung_decided", "record_intent:drop_conjunct:578d551a", f"{WRITTEN}r0:0 became intent"),
        ("hung_called", "record_confirm:drop_conjunct:578d551a",
         f"{WRITTEN}r0:0 became confirmed"),
        ("hung_beating", "renew_lease:drop_conjunct:d7e1dafa",
         "[foreign_renewal] run r0: w1 (generation 1) renewed the lease of a run held by "
         "nobody"),
        ("hung_redoing", "redo_intent:drop_conjunct:578d551a",
         WRITTEN.replace("generation 1", "generation 3") + "r0:2 became intent"),
    ],
)  # fmt: skip
def test_a_write_that_ignores_the_owner_lands_after_an_operators_retry_and_is_caught(
    runner: InProcessRunner, monkeypatch: pytest.MonkeyPatch, how: str, mutant: str, said: str
) -> None:
    """Each statement without its ``owner = %(owner)s``, argued equivalent until 2026-12-06
    ("the owner changes within a generation only at an adoption"): an operator's retry
    clears the owner and keeps the generation, so a woken worker's write landed."""
    kind, seq = RETRY_AT[how]
    plant_sql(monkeypatch, f"sql/queries.sql:{mutant}")
    assert said in failure(runner, retried(kind, how, seq))


def test_the_cancel_is_judged_as_an_operator_took_the_run_not_as_the_worker_failed_it(
    inprocess_runner: InProcessRunner,
) -> None:
    """The same answer without the cancel: the worker fails its run for good, at once."""
    events = (*BAD_ANSWER, Event(op="pause", run=0, point="after_decide"), Event(op="step", run=0))
    assert failure(inprocess_runner, events) == ""
    assert inprocess_runner.replay(events)["r0"]["status"] == "failed"


def test_a_thawed_worker_beats_and_is_fenced_the_same_in_both_runners(
    inprocess_runner: InProcessRunner, process_runner: ProcessRunner
) -> None:
    """``thaw`` wakes a stalled worker where it stands (a SIGCONT for a process): its
    heartbeat finds the run retried from under it before its work goes on."""
    events = retried(*RETRY_AT["hung_beating"][:1], "hung_beating", RETRY_AT["hung_beating"][1])
    traces = []
    for runner in (inprocess_runner, process_runner):
        assert failure(runner, events) == ""
        traces.append(list(runner.trace))
    assert traces[0] == traces[1]
    assert "thaw r0: w1 thawed at after_decide seq=0: it beats again" in traces[0]
    assert "heartbeat r0: w1 fenced" in traces[0]
    assert Schedule.from_json(Schedule(events=events).to_json()).events == events
    assert str(Event(op="thaw", run=1)) == "thaw r1"
    with pytest.raises(ScheduleError, match="thaw needs run"):
        Event(op="thaw")
