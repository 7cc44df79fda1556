"""The events of the small scope's race and durable stories (:mod:`properties.scope`): what
a race story races, and what a durable story does before its database crash."""

from __future__ import annotations

from typing import Final

from .events import Event
from .runner import SETTINGS

OUTAGE: Final = SETTINGS.tool_retries + 1  # failed requests that fail a whole call


def raced(how: str) -> tuple[Event, ...]:
    """A race story's race: inside a write (race), or between two claims (race_claim: the
    second a takeover, or the sweep's once the lease ran out)."""
    if how == "race_claim":
        return (Event(op="race_claim", run=0),)
    if how == "race_sweep":
        return (Event(op="race_claim", run=0, seconds=SETTINGS.lease + 1),)
    return (Event(op="race", run=0),)


def before_db_crash(how: str, seq: int, fault: str) -> tuple[Event, ...]:
    """What a durable story does before its database crash (its write the last one)."""
    if how == "released_db_crash":  # an outage: the worker stops and releases the run
        return (
            Event(op="pause", run=0, point="before_intent", seq=seq),
            Event(op="cloud_fault", fault=fault, n=OUTAGE),
            Event(op="step", run=0),
        )
    if how == "adopted_db_crash":  # the sweep's claim, adopted by the worker it starts,
        return (  # while a second run holds the same generation (its claim is not renamed)
            Event(op="start", run=1),
            Event(op="restart", run=1),
            Event(op="crash", run=0, point="after_decide", seq=seq),
            Event(op="sweep"),
        )
    if how == "renewed_db_crash":  # the heartbeat renews the lease
        return (
            Event(op="pause", run=0, point="before_intent", seq=seq),
            Event(op="tick", seconds=3.0),
        )
    if how == "parked_db_crash":  # a restart finds the once call in doubt and parks the run
        return (
            Event(op="crash", run=0, point="after_intent", seq=seq),
            Event(op="restart", run=0),
        )
    # redone_db_crash: parked, an operator orders a redo once the crashed send can no longer
    # land (a redo is refused before), the next worker makes it its intent and sends it: the
    # crash must leave an intent in doubt, not a redo to send again
    return (
        Event(op="crash", run=0, point="after_intent", seq=seq),
        Event(op="restart", run=0),
        Event(op="tick", seconds=SETTINGS.in_flight + 1),
        Event(op="resolve", run=0, choice="redo"),
        Event(op="sweep", seconds=0.0),
        Event(op="pause", run=0, point="after_call", seq=seq),
    )


def idle(seq: int) -> tuple[Event, ...]:
    """A minute and a second pass while the worker waits before its decision at ``seq``
    (its heartbeat keeps the lease); it journals the decision and waits again: the run's
    ``updated_at`` must have caught up with it (``activity``)."""
    return (
        Event(op="pause", run=0, point="before_decide", seq=seq),
        Event(op="tick", seconds=61.0),
        Event(op="pause", run=0, point="after_decide", seq=seq),
        Event(op="step", run=0),
    )
