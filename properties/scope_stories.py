"""The events of the small scope's race and durable stories (:mod:`properties.scope`): what
a race story races, and what a durable story does before its database crash."""

from __future__ import annotations

from typing import Final

from .events import Event
from .hung_stories import HUNG_AT, hung
from .runner import OUTAGE, SETTINGS
from .waits import WAIT_POINT

HELD_STORIES: Final = ("held_killed", "held_retried", "held_late", "held_crept", "held_moved")
# held_late's restart comes this long before the held send's in-flight bound (the tool
# timeout plus the margin) has passed: a check must still wait
LATE: Final = 0.5
# held_crept, held_moved: the part of its landing wait the clock moves while the restart
# stands in it (Actor._await_landing: less than half releases the run, at least half waits
# the rest), well clear of the half so that no rounding decides
CREPT: Final = 0.4
MOVED: Final = 0.6
# the landing stories wait only where a checked call is resumed: the support desk's email
LANDING_STORIES: Final = ("held_crept", "held_moved")
LANDING_AT: Final = ("support", "send_email")


def held(how: str, seq: int) -> tuple[Event, ...]:
    """The step's request is held at its remote (its sender sees a 504): the worker's own
    retry goes on (held_retried), or the worker is killed while it waits to retry and a
    restart comes at once (held_killed: the kill-while-in-flight story), or when all but
    :data:`LATE` of the send's in-flight bound has passed (held_late), and goes on at once,
    or stops in its wait for the send to land while the clock moves part of that wait
    (held_crept: :data:`CREPT`, held_moved: :data:`MOVED`) and then goes on; then the
    held request lands, and a sweep settles the call by its contract. Past the first step,
    the step's intent comes a second after the run's earlier calls, so that a wait read from
    another call's bound (an earlier one) is not the same wait."""
    events = []
    if seq > 0:  # the run's earlier calls a second before: each call's bound is its own
        events += [
            Event(op="pause", run=0, point="after_confirm", seq=seq - 1),
            Event(op="tick", seconds=1.0),
        ]
    events += [
        Event(op="pause", run=0, point="after_intent", seq=seq),
        Event(op="cloud_fault", fault="hold_next", n=1),
    ]
    if how == "held_retried":
        events.append(Event(op="step", run=0))
    else:  # killed while it waits to retry (its 504 heard, the request still held)
        events.append(Event(op="crash", run=0, point=WAIT_POINT, seq=seq, kill=True))
        if how == "held_late":
            events.append(Event(op="tick", seconds=SETTINGS.in_flight - LATE))
        # the restart's check (or keyed re-send) comes before the held request lands
        events.append(Event(op="restart", run=0))
        if how in LANDING_STORIES:  # the restart stands in its landing wait: the clock moves
            part = CREPT if how == "held_crept" else MOVED
            events += [
                Event(op="pause", run=0, point=WAIT_POINT, seq=seq),
                Event(op="tick", seconds=part * SETTINGS.in_flight),
            ]
        events.append(Event(op="step", run=0))
    return (*events, Event(op="land"), Event(op="sweep"))


# A model answer of two calls whose last is refused (invalid arguments; the mock spoils
# the last of several every other time): its journaled call must carry its own step's key
# (run:seq), wherever it sits in the answer. At the parallel kind's answer, as it comes
# (seq 1) and one step later (an unknown tool refused first: seq 2), so that no
# arithmetic of the place in the answer matches seq + i at both. One cell each, there.
REFUSED_AT: Final = {"refused_last": ("parallel", 1), "refused_later": ("parallel", 2)}
REFUSED_STORIES: Final = tuple(REFUSED_AT)


def refused(how: str, seq: int) -> tuple[Event, ...]:
    """The parallel kind's answer of two calls at ``seq`` has its last call refused (after
    an unknown tool refused at seq 0, for refused_later); the run goes on, a sweep comes."""
    events = [Event(op="start", run=0, agent=REFUSED_AT[how][0])]
    if how == "refused_later":
        events += [
            Event(op="pause", run=0, point="before_decide", seq=0),
            Event(op="model_fault", fault="unknown_tool", n=1),
        ]
    return (
        *events,
        Event(op="pause", run=0, point="before_decide", seq=seq),
        Event(op="model_fault", fault="invalid_args", n=1),
        Event(op="step", run=0),
        Event(op="sweep"),
    )


# An operator's retry of a run that failed for good (it goes back to pending, its next
# worker fails it again: the bad answers stay in its history), then of the run while that
# worker holds a live lease (refused). One cell, at the first kind's first step.
# retried_db_crash: the database crashes right after the first retry (a durable write).
RETRY_AT: Final = {
    "retried": ("provisioning", 0),
    "retried_db_crash": ("provisioning", 0),
    **{how: (kind, seq) for how, (_, kind, seq) in HUNG_AT.items()},
}
RETRY_STORIES: Final = tuple(RETRY_AT)


def retried(kind: str, how: str, seq: int) -> tuple[Event, ...]:
    """Workers that show the model one bad answer get two (the run fails for good), an
    operator retries it, a sweep hands it to a new worker, the operator retries again while
    that worker holds it (refused: its lease is live), and the worker goes on; or the
    database crashes right after the first retry (retried_db_crash); or a hung story (see
    :data:`RETRY_AT`)."""
    if how.startswith("hung_"):
        return hung(kind, how, seq)
    failed = (
        Event(op="configure", setting="max_bad_answers", n=1),
        Event(op="start", run=0, agent=kind),
        Event(op="pause", run=0, point="before_decide", seq=seq),
        Event(op="model_fault", fault="unknown_tool", n=2),
        Event(op="step", run=0),
        Event(op="retry", run=0),
    )
    if how == "retried_db_crash":
        return (*failed, Event(op="db_crash"))
    return (*failed, Event(op="sweep"), Event(op="retry", run=0), Event(op="step", run=0))


# An operator decides the once call too early: while the run's worker still drives it
# (paused after its intent: resolve_running), or while its held send may still land
# (redo_in_flight: the redo must be refused until the in-flight bound passed). One cell
# each, at the once run's once call.
EARLY_RESOLVE_AT: Final = {"resolve_running": ("once", 2), "redo_in_flight": ("once", 2)}


def resolved_early(kind: str, seq: int, how: str) -> tuple[Event, ...]:
    """``resolve --confirm`` of a running run's intent (refused; then the worker's step),
    or ``resolve --redo`` of a parked call whose send is held (refused; the held send
    lands, and a sweep settles the call as the operator's careful resolve does)."""
    start = (
        Event(op="start", run=0, agent=kind),
        Event(op="pause", run=0, point="after_intent", seq=seq),
    )
    if how == "redo_in_flight":
        return (
            *start,
            Event(op="cloud_fault", fault="hold_next", n=1),
            Event(op="step", run=0),
            Event(op="resolve", run=0, choice="redo"),
            Event(op="sweep", seconds=0.0),
            Event(op="land"),
            Event(op="sweep"),
        )
    return (*start, Event(op="resolve", run=0, choice="confirm"), Event(op="step", run=0))


# A deployment switches the seed's run to Chat Completions between two of its workers, and
# back (switched): the chat question carries the decide answers as the runtime remakes them,
# the decide question the steps chat decided. A supervisor claims and dies before its
# hand-out (orphaned): a restart proves its claim's owner dead (host:pid:nonce:run). A
# worker that is a thread of the claimer's own process crashes (sibling: run r1's,
# pilots.SIBLING_RUN): its process lives, so nothing proves it dead. Two once runs parked
# at the same step, and an operator resolves one (two_parked). Two keyed calls in doubt at
# one step, each re-sent by its run's restart (two_resent). One cell each.
SHIFT_AT: Final = {
    "switched": ("provisioning", 2),
    "orphaned": ("provisioning", 0),
    "sibling": ("provisioning", 0),
    "two_parked": ("once", 2),
    "two_resent": ("provisioning", 1),
}


def shifted(how: str, seq: int) -> tuple[Event, ...]:
    """The seed's run r0, its worker paused before its decision at ``seq``: a restart
    under Chat Completions, its step, then one under the agent's own protocol again
    (switched); or its worker crashed after its intent there, a supervisor's orphaned claim,
    a restart before that claim's lease ran out (orphaned); or run r1's worker, a thread of
    the claimer's process, crashed after its intent and a restart (sibling); or two once
    runs parked at that step, an operator's redo of r0's call alone, then of r1's: each
    worker's redo must make its own run's call an intent again, not the other's
    (two_parked); or two runs' keyed calls in doubt at that step, each restart re-sending
    its own run's (two_resent)."""
    start = Event(op="start", run=0, agent=SHIFT_AT[how][0])
    if how == "two_parked":  # both once runs park at the send; the operator redoes r0's
        crashes = [Event(op="crash", run=r, point="after_intent", seq=seq) for r in (0, 1)]
        return (
            Event(op="start", run=0, agent="once"),
            Event(op="start", run=1, agent="once"),
            *crashes,
            Event(op="restart", run=0),
            Event(op="restart", run=1),
            Event(op="tick", seconds=SETTINGS.in_flight + 1),
            Event(op="resolve", run=0, choice="redo"),
            Event(op="resolve", run=1, choice="redo"),  # both redone: r0's redo is r0's
        )
    if how == "two_resent":  # two keyed calls in doubt at one step; each restart re-sends
        return (
            Event(op="start", run=0, agent="provisioning"),
            Event(op="start", run=1, agent="provisioning"),
            *[Event(op="crash", run=r, point="after_intent", seq=seq) for r in (0, 1)],
            Event(op="restart", run=0),
            Event(op="step", run=0),
            Event(op="restart", run=1),
        )
    if how == "sibling":  # run r1's worker, a thread of the claimer's process, dies
        return (
            Event(op="start", run=1, agent=SHIFT_AT[how][0]),
            Event(op="crash", run=1, point="after_intent", seq=seq),
            Event(op="restart", run=1),
            Event(op="sweep"),
        )
    if how == "orphaned":
        return (
            start,
            Event(op="crash", run=0, point="after_intent", seq=seq),
            Event(op="orphan_sweep"),
            Event(op="restart", run=0),
            Event(op="sweep"),
        )
    return (
        start,
        Event(op="pause", run=0, point="before_decide", seq=seq),
        Event(op="configure", setting="model_protocol", n=1),
        Event(op="restart", run=0),
        Event(op="step", run=0),
        Event(op="configure", setting="model_protocol", n=0),
        Event(op="restart", run=0),
        Event(op="sweep"),
    )


def by_step(how: str, seq: int) -> tuple[Event, ...]:
    """A one-cell story of this module that needs only its step: refused or shifted."""
    return refused(how, seq) if how in REFUSED_AT else shifted(how, seq)


def raced(how: str) -> tuple[Event, ...]:
    """A race story's race: inside a write (race), or between two claims (race_claim: the
    second a takeover, or the sweep's once the lease ran out)."""
    if how == "race_claim":
        return (Event(op="race_claim", run=0),)
    if how == "race_sweep":
        return (Event(op="race_claim", run=0, seconds=SETTINGS.lease + 1),)
    return (Event(op="race", run=0),)


def elsewhere(kind: str, seq: int) -> tuple[Event, ...]:
    """A worker on another host (run r2's: ``pilots.FOREIGN_RUN``) is killed after its
    intent; a restart takes the run over by force (its pid proves nothing here: never
    ``owner_dead``), and a sweep before its lease ran out must leave it alone; then the
    same for the restart's worker, killed after its confirm (the two name the two other
    hosts, one sorting before this host's name and one after: ``pilots.ELSEWHERE_HOSTS``)."""
    killed = (
        Event(op="sweep", seconds=1.0),
        Event(op="restart", run=2),
    )
    return (
        Event(op="start", run=2, agent=kind),
        Event(op="crash", run=2, point="after_intent", seq=seq, kill=True),
        *killed,
        Event(op="crash", run=2, point="after_confirm", seq=seq, kill=True),
        *killed,
        Event(op="sweep"),
    )


def durable(how: str, start: Event, seq: int, fault: str) -> tuple[Event, ...]:
    """A durable story: its write, then the database crash (failed_db_crash's workers are
    deployed to fail a run at its second bad answer before the run starts)."""
    if how == "failed_db_crash":  # the run fails for good: fail_run, the last write
        return (
            Event(op="configure", setting="max_bad_answers", n=1),
            start,
            Event(op="pause", run=0, point="before_decide", seq=seq),
            Event(op="model_fault", fault="unknown_tool", n=2),
            Event(op="step", run=0),
            Event(op="db_crash"),
        )
    return (start, *before_db_crash(how, seq, fault), Event(op="db_crash"))


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
    if how == "orphaned_db_crash":  # a sweep's claim, its claimer dead before hand-out:
        return (  # no worker adopts it, so no later durable commit flushes it
            Event(op="crash", run=0, point="after_intent", seq=seq),
            Event(op="orphan_sweep"),
        )
    if how == "resent_db_crash":  # a restart's re-send journaled (record_send), its
        return (  # request held at the remote, the worker waiting to retry: then the crash
            Event(op="crash", run=0, point="after_intent", seq=seq),
            Event(op="cloud_fault", fault="hold_next", n=1),
            Event(op="restart", run=0),
            Event(op="pause", run=0, point=WAIT_POINT, seq=seq),
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
    if how == "resolved_db_crash":  # parked, an operator's redo once nothing can land
        return (
            Event(op="crash", run=0, point="after_intent", seq=seq),
            Event(op="restart", run=0),
            Event(op="tick", seconds=SETTINGS.in_flight + 1),
            Event(op="resolve", run=0, choice="redo"),
            Event(op="resolve", run=1, choice="redo"),  # both redone: r0's redo is r0's
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
