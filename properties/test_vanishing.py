"""What a database crash may take back since the decision commits without the WAL flush.

An answer and its decisions commit with ``synchronous_commit = off``; the intent's durable
commit flushes them. A crash of the server between the two takes the answer back, and the
restart asks the model again: the suite must count that re-ask as excused, whether or not
the shadow saw the decision before the crash, and still catch a decision lost after its
call went out.
"""

from __future__ import annotations

import pytest

from .events import Event
from .minimise import first_failure
from .runners import InProcessRunner


@pytest.mark.parametrize(
    "events",
    [
        # journaled and lost in the same event: the shadow never saw it
        (Event(op="start", run=0), Event(op="db_crash", run=0, point="after_decide")),
        # seen at a gate first, lost in the next event
        (
            Event(op="start", run=0),
            Event(op="stall", run=0, point="before_intent"),
            Event(op="db_crash"),
        ),
        # after step 1's call: both decisions were flushed by their intents, nothing vanishes
        (Event(op="start", run=0), Event(op="db_crash", run=0, point="after_call", seq=1)),
    ],
    ids=["unseen", "seen", "flushed_by_intents"],
)
def test_a_decision_a_database_crash_takes_back_is_asked_again_and_excused(
    inprocess_runner: InProcessRunner, events: tuple[Event, ...]
) -> None:
    assert first_failure(inprocess_runner, events) is None
