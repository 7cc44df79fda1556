"""The small scope's hung stories (:mod:`properties.scope`, one cell each): a worker hangs
(stalled) past its lease at a gate, an operator retries its run (which clears the owner and
keeps the generation), and it wakes: every write it makes then must be refused
(``operator_fence``, :mod:`properties.fences`), each story reaching a different first
write."""

from __future__ import annotations

from typing import Final

from .events import Event
from .runner import OUTAGE, SETTINGS

LAPSED: Final = SETTINGS.lease + 1  # seconds past which a hung worker's lease has lapsed

# The hung stories: a worker hangs (stalled) past its lease at a gate, an operator retries
# its run (which clears the owner and keeps the generation), and it wakes: every write it
# makes then must be refused, each story reaching a different first write. hung_asking:
# its model call and decision; hung_decided: its intent; hung_sending: its second send's
# start (its first request failed; it hangs waiting to retry); hung_called:
# its confirm; hung_finished: its run's finish (the final answer's step); hung_failed: its
# failure (its answer had an invalid call, past max_bad_answers 0); hung_released: its
# release (its read meets an outage: the only stop of a step that writes nothing before);
# hung_redoing: the re-send an operator ordered (`resolve --redo` of the parked once call);
# hung_beating: its heartbeat's renewal (it thaws, beats, and only then goes on).
HUNG_AT: Final = {
    "hung_asking": ("before_decide", "provisioning", 1),
    "hung_answered": ("after_decide_before_journal", "provisioning", 1),
    "hung_decided": ("after_decide", "provisioning", 0),
    "hung_sending": ("retry_wait", "provisioning", 0),
    "hung_called": ("after_call", "provisioning", 0),
    "hung_finished": ("after_decide", "provisioning", 3),
    "hung_failed": ("after_decide", "provisioning", 0),
    "hung_released": ("after_intent", "support", 0),
    "hung_redoing": ("before_intent", "once", 2),
    "hung_beating": ("after_decide", "provisioning", 0),
}


def hung(kind: str, how: str, seq: int) -> tuple[Event, ...]:
    """Stalled at the step's gate past its lease, retried by an operator, woken; then a
    sweep at once hands the run to a new worker."""
    start = Event(op="start", run=0, agent=kind)
    woken = (
        Event(op="tick", seconds=LAPSED),
        Event(op="retry", run=0),
        Event(op="resume", run=0),
        Event(op="sweep", seconds=0.0),
    )
    stall = Event(op="stall", run=0, point=HUNG_AT[how][0], seq=seq)
    if how == "hung_failed":
        return (
            Event(op="configure", setting="max_bad_answers", n=0),
            start,
            Event(op="model_fault", fault="invalid_args", n=1),
            stall,
            *woken,
        )
    if how == "hung_sending":
        return (start, Event(op="cloud_fault", fault="fail_before", n=1), stall, *woken)
    if how == "hung_beating":  # woken, its heartbeat beats before its work goes on
        thaw, beat = Event(op="thaw", run=0), Event(op="heartbeat", run=0)
        return (start, stall, woken[0], woken[1], thaw, beat, *woken[2:])
    if how == "hung_redoing":  # died after its intent; parked; redo ordered; claimed
        return (
            start,
            Event(op="crash", run=0, point="after_intent", seq=seq),
            Event(op="sweep"),
            Event(op="resolve", run=0, choice="redo"),
            Event(op="sweep", seconds=0.0),
            stall,
            *woken,
        )
    if how == "hung_released":
        return (start, stall, Event(op="cloud_fault", fault="fail_lookups", n=OUTAGE), *woken)
    return (start, stall, *woken)
