"""What a worker hands back (its ``Outcome``, its fencing log lines) and its last activity,
each judged against the slip it exists to catch (mutation testing's gap class 17: see
ARCHITECTURE.md). Each slip is planted in this process's runtime (the in-process runner's
workers are threads)."""

from __future__ import annotations

import logging

import pytest

from agent_runtime.loop import stopping
from agent_runtime.loop.outcome import Outcome

from .events import Event
from .handback import STOPPING, _listen, logfmt
from .planting import failure, plant_sql
from .runners import InProcessRunner

# A zombie: r0's first worker stalls before deciding, the sweep hands the run to another,
# which finishes it; the first wakes up fenced.
ZOMBIE = (
    Event(op="start", run=0, agent="provisioning"),
    Event(op="stall", run=0, point="before_decide", seq=0),
    Event(op="sweep"),
    Event(op="step", run=0),
    Event(op="resume", run=0),
)
# r0 waits before its first decision while two minutes pass (its heartbeat keeps the
# lease), then journals that decision and waits again.
IDLE = (
    Event(op="start", run=0, agent="provisioning"),
    Event(op="pause", run=0, point="before_decide", seq=0),
    Event(op="tick", seconds=120.0),
    Event(op="pause", run=0, point="after_decide", seq=0),
    Event(op="resume", run=0),
)


def test_a_fenced_worker_must_say_who_holds_its_run(
    runner: InProcessRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert failure(runner, ZOMBIE) == ""
    # stopping:explain_fencing's `if run is not None` flipped: silent while the run exists
    monkeypatch.setattr(stopping, "explain_fencing", lambda journal, lease: None)
    assert "HandedBack: a fenced worker of r0 did not say who holds it now" in failure(
        runner, ZOMBIE
    )


def test_the_outcome_a_worker_returns_must_be_immutable(
    runner: InProcessRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    events = (Event(op="start", run=0, agent="provisioning"),)
    assert failure(runner, events) == ""
    # outcome's `frozen=True` made False: an Outcome anyone may change after the fact
    monkeypatch.setattr(Outcome, "__setattr__", object.__setattr__)
    assert "the Outcome of r0 can be changed" in failure(runner, events)


def test_a_decision_after_a_minute_idle_must_refresh_the_runs_activity(
    runner: InProcessRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert failure(runner, IDLE) == ""
    # the throttle flipped: updated_at refreshed only while it is fresh
    plant_sql(monkeypatch, "sql/queries.sql:record_decision:flip_comparison:fc46c922")
    assert "[activity] run r0" in failure(runner, IDLE)


def test_logfmt_reads_the_fencing_lines_and_refuses_other_text() -> None:
    assert logfmt("fenced run=r0 generation=2 reason='LeaseLost: a b=c'") == (
        "fenced",
        {"run": "r0", "generation": "2", "reason": "'LeaseLost: a b=c'"},
    )
    with pytest.raises(ValueError, match="not logfmt"):
        logfmt("lost-run the run r0 is gone")


def test_the_capture_hears_warnings_and_passes_on_only_what_the_configuration_would() -> None:
    """A quiet configuration (``agent_runtime.loop`` at ERROR) keeps a WARNING line from
    the handlers, yet the pilot's thread hears it; a level set on the stopping logger
    afterwards by someone else (the in-process runner's own line keeper) is theirs."""
    loop, logger = logging.getLogger("agent_runtime.loop"), logging.getLogger(STOPPING)
    saved = loop.level
    loop.setLevel(logging.ERROR)
    logger.setLevel(logging.NOTSET)
    seen: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: seen.append(record.getMessage())  # type: ignore[method-assign]
    logger.addHandler(handler)
    try:
        heard = _listen()
        logger.warning("fenced run=r9 generation=1 reason=x")
        logger.error("failed run=r9")
        assert heard == ["fenced run=r9 generation=1 reason=x", "failed run=r9"]
        assert seen == ["failed run=r9"]
        logger.setLevel(logging.INFO)  # someone else's level now
        logger.warning("lost-run run=r9")
        assert seen == ["failed run=r9", "lost-run run=r9"]
    finally:
        logger.removeHandler(handler)
        logger.setLevel(logging.NOTSET)
        loop.setLevel(saved)
