"""The pool mode's fixed schedules (the story, and what the pool hunts found), and how
many schedules of each kind a profile draws.

``properties/test_pool.py`` replays each under every profile, and the mutation command's
pool stage (:mod:`properties.mutation.poolstage`) replays them after its Hypothesis draws.
:func:`problem` is what each must show, whoever replays it: no violation, and for some
the trace lines or end statuses that make the story what it is.
"""

from __future__ import annotations

from typing import Any, Final

from .events import Event

CALM: Final = {"dev": 3, "ci": 4, "nightly": 60}  # calm schedules through both runners
STORMY: Final = {"dev": 4, "ci": 6, "nightly": 200}  # pool schedules, invariants alone
STORY: Final = [
    Event(op="start", run=0, agent="support"),
    Event(op="start", run=1, agent="parallel"),
    Event(op="crash", run=0, point="after_call", seq=1, kill=True),
    Event(op="stall", run=1, point="after_intent", seq=1),
    Event(op="sweep"),
    Event(op="rival_sweep"),
    Event(op="start", run=2, agent="once"),
    Event(op="sigterm", run=0),
    Event(op="resume", run=1),
    Event(op="hangup"),
    Event(op="step", run=2),
    Event(op="sweep", seconds=0.0),
    Event(op="stop_supervisor"),
    Event(op="tick", seconds=13.0),
]
STORY_SAYS: Final = (
    "crashed at after_call seq=1",
    "hands on r0",
    "stalled",
    "ended: SIGTERM",
    "orphans",
    "the supervisor stopped",
)
# r0 is cancelled before its pool worker adopts the lease (the worker refuses it, exit 5)
CANCELLED_BEFORE_ADOPTION: Final = [Event(op="start", run=0), Event(op="cancel", run=0)]
# the database crashes under a pool worker, then its supervisor hangs up (exit 4, unrecorded)
CRASH_THEN_HANGUP: Final = [Event(op="start", run=0), Event(op="db_crash"), Event(op="hangup")]
# the supervisor dies; its busy worker finishes r0 and leaves beside a hand-started worker
ORPHAN_BESIDE_HAND_STARTED: Final = [
    Event(op="start", run=0),
    Event(op="start", run=1),
    Event(op="restart", run=1),
    Event(op="hangup"),
    *[Event(op="step", run=0)] * 4,
]
# a frozen worker whose lease ran out is killed at the first sweep after
WATCHDOG: Final = [
    Event(op="start", run=0, agent="support"),
    Event(op="stall", run=0, point="after_intent", seq=1),
    Event(op="tick", seconds=13.0),
    Event(op="sweep"),
]
# the database crashes under a worker waiting to write its intent, then r0 is cancelled
CRASH_THEN_CANCEL: Final = [
    Event(op="start", run=0),
    Event(op="db_crash", run=0, point="before_intent"),
    Event(op="cancel", run=0),
]
# a pool worker crashes (exit 1) on its run's first attempt: the run is claimable at once
FIRST_CRASH: Final = [Event(op="start", run=0), Event(op="crash", run=0, point="after_intent")]
# its pool worker dies three times in a row before any progress: the second and third
# deaths back the run off by the backoff's first and second waits (pool_freed), then it is
# claimed and finishes
CRASHES_IN_A_ROW: Final = [
    Event(op="start", run=0),
    Event(op="crash", run=0, point="after_intent", seq=0),
    Event(op="sweep"),
    Event(op="crash", run=0, point="after_intent", seq=0),
    Event(op="sweep", seconds=0.0),  # freed: backing off one second
    Event(op="db_crash"),  # the free is durable: nothing but the backoff holds the run
    Event(op="sweep", seconds=2.0),  # claimed again
    Event(op="crash", run=0, point="after_intent", seq=0),
    Event(op="sweep", seconds=0.0),  # freed: backing off two seconds
    Event(op="sweep"),
]
FIXED: Final = {
    "story": STORY,
    "cancelled before adoption": CANCELLED_BEFORE_ADOPTION,
    "crash then hang-up": CRASH_THEN_HANGUP,
    "orphan beside a hand-started worker": ORPHAN_BESIDE_HAND_STARTED,
    "watchdog": WATCHDOG,
    "crash then cancel": CRASH_THEN_CANCEL,
    "first crash": FIRST_CRASH,
    "crashes in a row": CRASHES_IN_A_ROW,
}


def problem(name: str, outcome: Any, trace: list[str]) -> str | None:
    """What is wrong with one replay of ``FIXED[name]`` (``outcome``: a violation's text,
    else the runs' ends), or None."""
    text = "\n".join(trace)
    if isinstance(outcome, str):
        return outcome
    if name == "story":
        missing = [said for said in STORY_SAYS if said not in text]
        if missing or any(outcome[r]["status"] != "done" for r in ("r0", "r1", "r2")):
            return f"the story went otherwise (missing {missing}): {outcome}"
    wanted = {
        "cancelled before adoption": ("r0", "cancelled"),
        "crash then cancel": ("r0", "cancelled"),
    }.get(name)
    if wanted is not None and outcome[wanted[0]]["status"] != wanted[1]:
        return f"{wanted[0]} ended {outcome[wanted[0]]['status']}, not {wanted[1]}"
    said = {
        "orphan beside a hand-started worker": "step r0: w1 ended: done",
        "watchdog": "waiting w1 ended: crashed",
        "crashes in a row": "w3 crashed at after_intent seq=0",  # the third death came
    }.get(name)
    if said is not None and said not in text:
        return f"{said!r} not in the trace"
    return None
