"""The small scope: every single-disruption schedule of every kind of run, tried in order.

Random generation is good at long, tangled schedules and poor at covering a grid: under
the ``ci`` profile a crash at ``after_call`` of a support run's third step -- the one
schedule a check skipped at restart needs -- came up in none of 300 examples. Most bugs
need one disruption at one place, so first :func:`sweep` replays each of these, for every
kind of run, every step of its crash-free baseline and every crash point of that step:

- ``crash``: the worker dies there, a new one takes over, and a supervisor's sweep comes
  by (it must leave the new owner's live lease, and a parked run, alone);
- ``overtaken``: the worker freezes there past its lease, the sweep hands the run to a
  new worker which does the step, and then the old one wakes;
- ``outpaced``: the worker waits there alive, a restart takes the run over, the old
  worker's heartbeat finds out, and it goes on;
- ``woken``: the worker freezes there, is swept, and wakes into a remote's outage;
- ``cancelled``: an operator cancels the run while the worker waits there, the worker
  goes on, a sweep comes by, someone resumes the run (nothing of it may be accepted,
  nobody may claim it, the resume is refused);
- ``db_crash``: the database crashes while the worker waits there (its heartbeat beats
  before and after: on the connection the crash broke);
- ``race_intent``, ``race_send``, ``race_confirm`` (one cell each): a restart's claim
  overtakes the worker inside its write of the call (``race``), then as ``outpaced``;
  ``race_claim``, ``race_sweep``: a restart's claim is held inside its statement while the
  runner takes the run over too, or sweeps once the lease ran out (``race_claim``);

three stories of an operator (``resolve_*``: a ``once`` run's worker frozen at its send, the
run parked, the operator decides while the frozen one waits); once per step, the stories
that place a fault themselves (``bad_answers``, ``remote_fault``, ``outage``, ``gave_up``,
``no_retries``, ``wait_outpaced``, ``wait_cancelled``, ``stale_outage``, ``two_runs``, the
``held_*`` ones of :mod:`properties.scope_stories`); and one cell each: the seven durable
stories, ``elsewhere`` (workers of other hosts killed), the two ``refused_*`` (an answer's
last call refused), ``switched``, ``orphaned``, ``sibling`` and ``two_parked`` (worlds of
:mod:`properties.scope_stories`). ARCHITECTURE.md's "The small scope first" tells each.

The order is breadth first: every story at the first step of the first kind and the
one-cell stories, then the steps whose tool has a contract of its own, then the rest, the
database crash last (the dearest: a server restart each). A failure is saved like one of
Hypothesis' (``<name>-scope-<digest>.json``), already as short as it can be; the grid is
the same every run: 700 schedules.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from agent_runtime.crash import CRASH_POINTS

from . import scope_stories
from .agents import KINDS
from .events import Event, Schedule
from .minimise import first_failure
from .runner import OUTAGE, ScheduleRunner
from .scope_stories import HELD_STORIES, elsewhere, held, idle, raced
from .waits import WAIT_POINT

POINT_STORIES: Final = ("crash", "overtaken", "outpaced", "woken", "cancelled", "db_crash")
# a takeover (wait_outpaced) or an operator's cancel (wait_cancelled) lands while the worker
# waits to retry a failed request (properties.waits): it must not send again
WAIT_STORIES: Final = ("wait_outpaced", "wait_cancelled")
STEP_STORIES: Final = (
    "bad_answers", "remote_fault", "outage", "stale_outage", "two_runs", "held_killed",
    "held_retried", "held_late", *scope_stories.LANDING_STORIES, "gave_up", "no_retries",
    *WAIT_STORIES, "idle",
)  # fmt: skip
READ_STORIES: Final = ("stale_outage",)  # only at a step whose tool is a read
READ_TOOL: Final = "lookup_order"  # the suite's read tool (the desk's; fail_lookups spoils it)
# an operator decides a parked once call while the parked worker's zombie waits at its gate
RESOLVE_STORIES: Final = {"resolve_confirm": "after_call", "resolve_redo": "after_intent",
                          "resolve_fail": "after_intent"}  # fmt: skip
# A database crash right after a durable write no step makes: a release, adoption, renewal,
# failure, re-send's start, an unadopted sweep's claim (the first kind's first step), a park,
# an operator's redo, that redo made the next worker's intent and sent (at the once call).
DURABLE_STORIES: Final = (
    "released_db_crash", "adopted_db_crash", "renewed_db_crash", "parked_db_crash",
    "redone_db_crash", "failed_db_crash", "resolved_db_crash", "resent_db_crash",
    "orphaned_db_crash",
)  # fmt: skip
AT_ONCE_CALL: Final = ("parked_db_crash", "redone_db_crash", "resolved_db_crash")
HOST_STORIES: Final = ("elsewhere",)  # a worker of another host dies (one cell, as above)
# A claim overtakes a fenced write of a call inside its statement (properties.race): the
# intent, a retry's send (one failed request first), the confirm; where the worker waits
# before it. One cell each, in the first pass: the lock is one per statement. At the support
# run's ticket (RACE_AT): a keyed call whose tool retries itself (record_send; the seed's
# tools leave retries to their client).
RACE_STORIES: Final = {"race_intent": "before_intent", "race_send": "after_intent",
                       "race_confirm": "after_call", "race_claim": "after_decide",
                       "race_sweep": "after_decide"}  # fmt: skip
RACE_AT: Final = ("support", 1)
REFUSED_STORIES: Final = scope_stories.REFUSED_STORIES  # one cell: scope_stories.REFUSED_AT
AT: Final = {
    **dict.fromkeys(RACE_STORIES, RACE_AT),
    **scope_stories.REFUSED_AT,
    **scope_stories.RETRY_AT,
    **scope_stories.EARLY_RESOLVE_AT,
    **scope_stories.SHIFT_AT,
}
ONE_CELL_STORIES: Final = (*DURABLE_STORIES, *HOST_STORIES, *AT)
# the database crash last: it is the dearest (a server restart each)
STORIES: Final = (
    "crash", "overtaken", "outpaced", *RACE_STORIES, *HOST_STORIES, *REFUSED_STORIES,
    *scope_stories.RETRY_STORIES, *scope_stories.EARLY_RESOLVE_AT, *scope_stories.SHIFT_AT,
    *STEP_STORIES, "woken",
    "cancelled",
    *RESOLVE_STORIES, *DURABLE_STORIES, "db_crash",
)  # fmt: skip
DECIDE_POINTS: Final = ("before_decide", "after_decide_before_journal", "after_decide")
# A database crash sees only what is written: the journal is the same at before_decide as
# at the previous after_confirm, at after_decide_before_journal as at before_decide, at
# before_intent as at after_decide, at after_call as at after_intent. One of each suffices.
WRITTEN_AT: Final = ("after_decide", "after_intent", "after_confirm")
ONCE_TOOL: Final = {"once": "send_email"}  # the kind whose call parks the run, and its tool
# the tools whose contract no first-kind step has: the read, the checked send, the once call
CONTRACT_TOOLS: Final = {"support": (READ_TOOL, "send_email"), "once": (ONCE_TOOL["once"],)}


def story(kind: str, how: str, point: str, seq: int, tool: str = "") -> tuple[Event, ...]:
    """One disruption of run r0 (of ``kind``) at ``point`` of step ``seq`` (a step story
    ignores ``point``: it places its fault itself, by the step's ``tool``)."""
    start = Event(op="start", run=0, agent=kind)
    fault = "fail_lookups" if tool == READ_TOOL else "fail_before"
    if how == "crash":
        return (
            start,
            Event(op="crash", run=0, point=point, seq=seq),
            Event(op="restart", run=0),
            Event(op="sweep"),
        )
    if how == "overtaken":
        return (
            start,
            Event(op="stall", run=0, point=point, seq=seq),
            Event(op="sweep"),
            Event(op="step", run=0),
            Event(op="resume", run=0),
        )
    if how == "outpaced":
        return (
            start,
            Event(op="pause", run=0, point=point, seq=seq),
            Event(op="restart", run=0),
            Event(op="heartbeat", run=0),
            Event(op="resume", run=0),
        )
    if how == "woken":  # frozen past its lease, swept, and woken into an outage
        return (
            start,
            Event(op="stall", run=0, point=point, seq=seq),
            Event(op="sweep"),
            Event(op="cloud_fault", fault="fail_before", n=OUTAGE),
            Event(op="resume", run=0),
        )
    if how == "db_crash":  # its heartbeat beat before, and beats on the broken connection
        beat = Event(op="heartbeat", run=0)
        return (start, beat, Event(op="db_crash", run=0, point=point, seq=seq), beat)
    if how == "idle":  # a minute idle before a decision: record_decision's throttle
        return (start, *idle(seq))
    if how == "cancelled":  # an operator cancels while the worker waits there; it goes on;
        return (  # a sweep, and someone's resume of the run, must leave it cancelled
            start,
            Event(op="pause", run=0, point=point, seq=seq),
            Event(op="cancel", run=0),
            Event(op="step", run=0),
            Event(op="sweep"),
            Event(op="restart", run=0),
        )
    if how in RESOLVE_STORIES:  # frozen at the send, parked by the sweep's worker, decided
        return (
            start,
            Event(op="stall", run=0, point=point, seq=seq),
            Event(op="sweep"),
            Event(op="resolve", run=0, choice=how.removeprefix("resolve_")),
            Event(op="resume", run=0),
            Event(op="sweep", seconds=0.0),
            Event(op="crash", run=0, point="after_call"),
            Event(op="restart", run=0),
        )
    if how in DURABLE_STORIES:
        return scope_stories.durable(how, start, seq, fault)
    if how in HOST_STORIES:
        return elsewhere(kind, seq)
    if how in REFUSED_STORIES or how in scope_stories.SHIFT_AT:
        return (scope_stories.refused if how in REFUSED_STORIES else scope_stories.shifted)(
            how, seq
        )
    if how in scope_stories.EARLY_RESOLVE_AT:
        return scope_stories.resolved_early(kind, seq, how)
    if how in scope_stories.RETRY_STORIES:
        return scope_stories.retried(kind, how, seq)
    if how in RACE_STORIES:  # held inside the write while a restart claims; as outpaced then
        spoiled: tuple[Event, ...] = ()
        if how == "race_send":  # its first request fails; it waits to send again, then races
            spoiled = (
                Event(op="cloud_fault", fault=fault, n=1),
                Event(op="pause", run=0, point="retry_wait", seq=seq),
            )
        return (
            start,
            Event(op="pause", run=0, point=RACE_STORIES[how], seq=seq),
            *spoiled,
            *raced(how),
            Event(op="heartbeat", run=0),
            Event(op="resume", run=0),
        )
    if how == "bad_answers":  # the model answers garbage twice; the run is then restarted
        return (
            start,
            Event(op="pause", run=0, point="before_decide", seq=seq),
            Event(op="model_fault", fault="malformed", n=2),
            Event(op="step", run=0),
            Event(op="restart", run=0),
        )
    if how == "gave_up":  # workers that show the model one bad answer; it gives two: the
        return (  # run fails for good, and a restart and a sweep must leave it failed
            Event(op="configure", setting="max_bad_answers", n=1),
            start,
            Event(op="pause", run=0, point="before_decide", seq=seq),
            Event(op="model_fault", fault="unknown_tool", n=2),
            Event(op="step", run=0),
            Event(op="restart", run=0),
            Event(op="sweep"),
        )
    if how == "no_retries":  # workers configured to send a request once: one failed
        return (  # request stops the step (resumably), and the next worker gets through
            Event(op="configure", setting="tool_retries", n=0),
            start,
            Event(op="pause", run=0, point="before_intent", seq=seq),
            Event(op="cloud_fault", fault=fault, n=1),
            Event(op="step", run=0),
            Event(op="sweep"),
        )
    if how in ("remote_fault", "outage"):
        # remote_fault: one failed request, which the client's own retry gets past (the
        # step must finish); outage: every attempt fails, the worker stops resumably and
        # must leave the run free (a once call parks instead)
        return (
            start,
            Event(op="pause", run=0, point="before_intent", seq=seq),
            Event(op="cloud_fault", fault=fault, n=1 if how == "remote_fault" else OUTAGE),
            Event(op="step", run=0),
        )
    if how in WAIT_STORIES:  # one failed request; while the worker waits to send it again,
        events = [  # the run is taken over (its heartbeat finds out) or cancelled
            start,
            Event(op="pause", run=0, point="before_intent", seq=seq),
            Event(op="cloud_fault", fault=fault, n=1),
            Event(op="pause", run=0, point=WAIT_POINT, seq=seq),
        ]
        if how == "wait_outpaced":
            events += [
                Event(op="restart", run=0),
                Event(op="heartbeat", run=0),
                Event(op="resume", run=0),
            ]
        else:
            events += [Event(op="cancel", run=0), Event(op="step", run=0)]
        return tuple(events)
    if how == "stale_outage":  # an outpaced worker's read meets an outage: its stop frees
        return (  # nothing of the run its successor holds
            start,
            Event(op="pause", run=0, point="after_intent", seq=seq),
            Event(op="restart", run=0),
            Event(op="cloud_fault", fault=fault, n=OUTAGE),
            Event(op="resume", run=0),
        )
    if how in HELD_STORIES:
        return (start, *held(how, seq))
    if how == "two_runs":  # two runs of a kind at the same step, one restarted; later,
        return (  # its next confirm is its own progress, none of the other run's
            start,
            Event(op="pause", run=0, point="after_confirm", seq=seq),
            Event(op="start", run=1, agent=kind),
            Event(op="pause", run=1, point="after_confirm", seq=seq),
            Event(op="restart", run=0),
            Event(op="tick", seconds=1.0),
            Event(op="step", run=0),
        )
    raise ValueError(f"unknown story {how!r}; one of {', '.join(STORIES)}")


@dataclass(frozen=True, kw_only=True)
class Cell:
    """One schedule of the grid, and where in the grid it stands."""

    how: str
    kind: str
    point: str  # "" for a step story
    seq: int
    events: tuple[Event, ...]


def grid(runner: ScheduleRunner, *, stories: tuple[str, ...] = STORIES) -> Iterator[Cell]:
    """Every story at every point (or once) of every step of every kind's crash-free run:
    first every story at the first step of the first kind and at each step whose tool
    has a contract of its own, then all the rest.

    Breadth first: a bug in a mechanism (fencing, the claim, the heartbeat, a retry, the
    durability of a write) shows wherever the story that exercises it can fire, so the
    first step of one run tries every story within about a second (and the durable
    stories, one cell each, wherever they are). A contract is a mechanism too: a read
    has no journal guard, a checked send its check, a once call its parking and its
    durable confirm; so the steps of :data:`CONTRACT_TOOLS` come in a second pass, and only
    a bug of one place (one point, one step, one kind) waits for the deep pass."""

    def pass_of(c: Cell) -> int:
        if (c.kind == KINDS[0] and c.seq == 0) or c.how in ONE_CELL_STORIES:
            return 0
        return 1 if runner.baseline(c.kind).tools[c.seq] in CONTRACT_TOOLS.get(c.kind, ()) else 2

    shallow_first = sorted(_cells(runner, stories), key=pass_of)  # stable: story by story
    yield from shallow_first


def _cells(runner: ScheduleRunner, stories: tuple[str, ...]) -> Iterator[Cell]:
    for how in stories:
        for kind in KINDS:
            tools = runner.baseline(kind).tools
            for seq, tool in enumerate(tools):
                if how in RESOLVE_STORIES:
                    if ONCE_TOOL.get(kind) == tool:
                        point = RESOLVE_STORIES[how]
                        events = story(kind, how, point, seq)
                        yield Cell(how=how, kind=kind, point=point, seq=seq, events=events)
                    continue
                if how in AT:  # one cell, there
                    if (kind, seq) == AT[how]:
                        point = RACE_STORIES.get(how, "")
                        events = story(kind, how, point, seq)
                        yield Cell(how=how, kind=kind, point=point, seq=seq, events=events)
                    continue
                if how in DURABLE_STORIES or how in HOST_STORIES:
                    once_call = ONCE_TOOL.get(kind) == tool
                    if once_call if how in AT_ONCE_CALL else (kind, seq) == (KINDS[0], 0):
                        events = story(kind, how, "", seq, tool)
                        yield Cell(how=how, kind=kind, point="", seq=seq, events=events)
                    continue
                if how in STEP_STORIES:
                    if how in READ_STORIES and tool != READ_TOOL:
                        continue
                    landing = how in scope_stories.LANDING_STORIES
                    if landing and (kind, tool) != scope_stories.LANDING_AT:
                        continue
                    if how in WAIT_STORIES and ONCE_TOOL.get(kind) == tool:
                        continue  # a once call parks on a failed request: it never retries
                    if tool != "done" or how in ("bad_answers", "gave_up"):
                        events = story(kind, how, "", seq, tool)
                        yield Cell(how=how, kind=kind, point="", seq=seq, events=events)
                    continue
                points = DECIDE_POINTS if tool == "done" else CRASH_POINTS
                if how == "db_crash":
                    points = tuple(p for p in points if p in WRITTEN_AT)
                for point in points:
                    events = story(kind, how, point, seq)
                    yield Cell(how=how, kind=kind, point=point, seq=seq, events=events)


@dataclass(frozen=True, kw_only=True)
class Finding:
    path: Path
    schedule: Schedule
    error: AssertionError
    tried: int  # schedules replayed, this one included


@dataclass(frozen=True, kw_only=True)
class Swept:
    tried: int
    elapsed: float
    finding: Finding | None


def sweep(runner: ScheduleRunner, *, name: str, profile: str | None, failures_dir: Path) -> Swept:
    """Replay the grid until a schedule fails; save and report that one."""
    began = time.monotonic()
    tried = 0
    for cell in grid(runner):
        events = cell.events
        tried += 1
        error = first_failure(runner, events)
        if error is None:
            continue
        schedule = Schedule(
            events=events,
            name=name,
            variant=None if runner.variant.name == "correct" else runner.variant.name,
            seed=None,
            profile=profile,
            failure=f"{type(error).__name__}: {error}",
            meta={"runner": runner.mode, "trace": list(runner.trace), "found_by": "scope"},
        )
        digest = hashlib.sha1(json.dumps([e.to_json() for e in events]).encode()).hexdigest()
        path = schedule.save(failures_dir / f"{name}-scope-{digest[:8]}.json")
        finding = Finding(path=path, schedule=schedule, error=error, tried=tried)
        return Swept(tried=tried, elapsed=time.monotonic() - began, finding=finding)
    return Swept(tried=tried, elapsed=time.monotonic() - began, finding=None)
