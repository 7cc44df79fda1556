"""Fixed stories of the supervisor states the pool world never reaches by itself
(ARCHITECTURE.md, gap class 21), each with the settings it needs and a judge of exactly
what must happen, at which event.

The pool world's supervisors have room for :data:`~properties.pool_world.MAX_WORKERS`
workers, keep the default ``stuck_after`` (600 s) and serve every agent of the suite. So:

- ``lost``: a stalled (``SIGSTOP``) worker's lease runs out and a *rival* supervisor
  polls first and takes the run (``rival_sweep`` with seconds); the main supervisor's
  watchdog must see the run lost to its worker at its next pass (``worker-lost``), give
  the worker one lease (alive at exactly a lease), then kill it (``worker-hung ...
  run_lost_ago=13.0s``) a second later, not before; the run stays the rival's, claimed
  twice in all, done once;
- ``full``: ``max_workers=2`` and three runs: the third waits while two workers are busy
  and is handed on at the very pass that frees one; a worker's death in a full pool is
  replaced only by its run's new worker; the pool is never above two (``pool_room``,
  :mod:`properties.pool_watch`, checks every pass of every schedule);
- ``full_death``: the same pool full, r2 waiting, and r1's worker dies: two runs wait for
  one free worker, and the pass hands on one of them, never both (the pool stays at two);
- ``stuck``: ``stuck_after=1``: a worker held at a gate, alive and beating, its run's last
  progress at 0 s: the watchdog must leave it at 1 s (no progress for exactly
  ``stuck_after``) and kill it at 2 s (``worker-stuck``), its run claimed again in that
  pass and finished by its contract;
- ``hung``: a stalled worker (``SIGSTOP``) is left alone a second before its lease runs
  out and killed as hung the instant it does (``lease_expired_ago=0.0s``), its run
  claimed again in that pass;
- ``stuck_off``: the ``stuck`` story with ``stuck_after=0``, which turns the bound off:
  the paused worker is never killed;
- ``stuck_answered``: the same bound, the stuck worker's last progress a model answer (1 s)
  later than its last call, while a run started later answers and calls (2 s): the
  watchdog must measure from the stuck run's own latest answer -- not an earlier one, not
  another run's answer or call -- and kill it at 3 s, once;
- ``gave_up``: ``max_attempts=2``, ``give_up_after=5``: r0's worker dies before any
  progress, again and again, while r1's worker holds its run alive; the supervisor may give
  r0 up only once it has had two claims since its progress, the first five seconds ago,
  and its lease is free: not at its second death (0 s), not while a live worker holds it
  at 6 s, but at the pass that frees it after its third death (event 10), once, and never
  r1 (``gave-up`` lines), not even after a database crash (r1's worker dies with it, and
  the idle workers it is handed to next must not fail it on their dead connections);
- ``gave_up_crashed``: ``max_attempts=1``, ``give_up_after=0``: r0 is given up at the
  pass after its first death, and a database crash right after (no other write between)
  must not take the give-up back: it is not given up again;
- ``gave_up_late``: the same limits, r0 dying again and again after it made progress at
  2 s, and another run claimed at 3 s: the give-up's five seconds run from r0's own first
  claim since its progress (4 s), not from its first claim ever nor another run's: it is
  claimed again at 8.5 s, and given up only at the pass that frees it at 9.5 s (event 17);
  r1, freed at 9.5 s after its one claim 6.5 s before, is never given up (one attempt);
- ``unserved``: a run of an agent no supervisor serves, the clock moved a second at a
  time and the supervisor made to look at every pass: it names the run exactly when the
  run has waited two polls (docs/04, not the module's constant), not a second earlier;
  then 100 more wait: a look cut at its limit names the longest waiting, forgets none;
- ``unserved_mixed``: runs of two unserved agents (pending, and one whose worker elsewhere
  died holding it) beside a failed run of one of them and a backlog of the supervisor's
  own agent: one look names the three waiting runs, each once, and never the other two;
- ``unserved_cut``: a named run pushed out of a look cut at its limit (100 older runs of
  its agent lose their holders) while it still waits is not named again once they are
  claimed: a cut look forgets none of the runs it could not show.

Time moves only through the clock seam (the frozen ``cr_now()``); nothing sleeps.
:func:`state_problem` replays one story on a :class:`~properties.pool_runner.PoolRunner`
and says what went otherwise, or None; the mutation command's pool stage runs each.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Final

from agent_runtime.store.journal import Journal

from . import sqlfile
from .events import Event
from .pool_hearing import Said, at, hearing
from .pool_unserved import unserved, unserved_cut, unserved_mixed
from .runner import LEASE
from .runners import outcome_and_trace

if TYPE_CHECKING:
    from .pool_runner import PoolRunner

SETTINGS: Final[dict[str, dict[str, float]]] = {
    "lost": {},
    "full": {"max_workers": 2},
    "full_death": {"max_workers": 2},
    "stuck": {"stuck_after": 1.0},
    "stuck_answered": {"stuck_after": 1.0},
    "stuck_off": {"stuck_after": 0.0},
    "hung": {},
    "unserved": {},
    "unserved_mixed": {},
    "unserved_cut": {},
    "gave_up": {"max_attempts": 2, "give_up_after": 5.0},
    "gave_up_late": {"max_attempts": 2, "give_up_after": 5.0},
    "gave_up_crashed": {"max_attempts": 1, "give_up_after": 0.0},
}
LOST: Final = [
    Event(op="start", run=0, agent="support"),
    Event(op="stall", run=0, point="after_intent", seq=1),
    Event(op="rival_sweep", seconds=LEASE + 1),  # 2: the lease ran out; the rival is first
    Event(op="sweep", seconds=0.0),  # 3: the main watchdog sees the run lost
    Event(op="rival_sweep"),
    Event(op="sweep", seconds=LEASE),  # 5: a lease later: it gives the worker that lease
    Event(op="sweep", seconds=1.0),  # 6: a second more: it kills the worker
    Event(op="rival_sweep"),
]
FULL: Final = [
    Event(op="start", run=0),
    Event(op="start", run=1),
    Event(op="start", run=2),  # 2: two busy of two: it waits
    *[Event(op="step", run=0)] * 4,  # 6: r0 done: r2 goes to its worker
    Event(op="crash", run=1, point="after_intent"),  # 7: a death in a full pool
    Event(op="sweep", seconds=0.0),
]
RUN_IDS: Final = ("r0", "r1", "r2")
FULL_DEATH: Final = [
    Event(op="start", run=0),
    Event(op="start", run=1),
    Event(op="start", run=2),  # 2: two busy of two: it waits
    Event(op="crash", run=1, point="after_intent", seq=0),  # 3: r1 and r2 wait, one room
]
STUCK: Final = [
    Event(op="start", run=0),
    Event(op="pause", run=0, point="after_intent", seq=1),  # its last progress, at 0 s
    Event(op="tick", seconds=1.0),  # 2: no progress for 1 s: not more than stuck_after
    Event(op="tick", seconds=1.0),  # 3: 2 s: stuck
]
HUNG: Final = [
    Event(op="start", run=0),
    Event(op="stall", run=0, point="after_intent", seq=1),  # 1: SIGSTOP: it beats no more
    Event(op="tick", seconds=LEASE - 1),  # 2: its lease runs out in a second: left alone
    Event(op="tick", seconds=1.0),  # 3: it ran out this instant: killed, the run claimed
]
STUCK_ANSWERED: Final = [
    Event(op="start", run=0),
    Event(op="pause", run=0, point="after_confirm", seq=0),  # 1: its first step, at 0 s
    Event(op="tick", seconds=1.0),  # 2
    Event(op="pause", run=0, point="after_decide", seq=1),  # 3: its last progress: an answer
    Event(op="tick", seconds=1.0),  # 4: 2 s: 1 s since that answer
    Event(op="start", run=1),  # 5
    Event(op="pause", run=1, point="after_decide", seq=1),  # 6: r1's answers and call, at 2 s
    Event(op="tick", seconds=1.0),  # 7: 3 s: r0 stuck, r1 not
]
DIES: Final = Event(op="crash", run=0, point="before_decide", seq=0)  # before any progress
GAVE_UP: Final = [
    Event(op="start", run=0),
    Event(op="start", run=1),
    Event(op="pause", run=1, point="after_intent", seq=1),  # 2: alive, past its progress
    DIES,  # 3: r0's first death
    Event(op="sweep", seconds=0.0),  # 4: freed at once, claimed again: attempts 2
    DIES,  # 5
    Event(op="sweep", seconds=0.0),  # 6: freed, backing off 1 s; two claims, but at 0 s
    Event(op="sweep", seconds=2.0),  # 7: 2 s: claimed again, attempts 3, held alive
    Event(op="tick", seconds=4.0),  # 8: 6 s, the rule holds but a live worker holds r0
    DIES,  # 9
    Event(op="sweep", seconds=0.0),  # 10: freed: given up, in this very pass
    Event(op="db_crash"),  # 11: the give-up is durable: the crash keeps it
    Event(op="sweep", seconds=0.0),  # 12: a failed run is not given up again
    Event(op="sweep", seconds=0.0),  # 13
]
EPOCH: Final = "2030-01-01T00:00:"  # the frozen clock's start, as a backoff line says it
DIES_LATER: Final = Event(op="crash", run=0, point="before_decide", seq=1)  # past progress
GAVE_UP_LATE: Final = [
    Event(op="start", run=0),  # r0 claimed at 0 s
    Event(op="tick", seconds=2.0),  # 1
    Event(op="pause", run=0, point="after_confirm", seq=0),  # 2: its progress, at 2 s
    Event(op="tick", seconds=1.0),  # 3
    Event(op="start", run=1),  # 4: r1 claimed at 3 s, held alive from here on
    Event(op="tick", seconds=1.0),  # 5
    DIES_LATER,  # 6: r0's first death since its progress
    Event(op="sweep", seconds=0.0),  # 7: freed at once, claimed at 4 s: the window opens
    DIES_LATER,  # 8
    Event(op="sweep", seconds=0.0),  # 9: freed at once: two claims since the progress
    DIES_LATER,  # 10
    Event(op="sweep", seconds=0.0),  # 11: backing off a second from its death (10)
    Event(op="sweep", seconds=4.5),  # 12: 8.5 s: 4.5 s since the window opened: claimed
    Event(op="tick", seconds=1.0),  # 13: 9.5 s: a live worker holds r0
    Event(op="crash", run=1, point="before_decide", seq=0),  # 14: r1 claimed once, 6.5 s ago
    Event(op="sweep", seconds=0.0),  # 15: r1 freed and claimed again: one claim, kept
    DIES_LATER,  # 16
    Event(op="sweep", seconds=0.0),  # 17: freed: given up, in this very pass
]
GAVE_UP_CRASHED: Final = [
    Event(op="start", run=0),
    DIES,  # 1
    Event(op="sweep", seconds=0.0),  # 2: freed and given up (one attempt, no wait)
    Event(op="db_crash"),  # 3: no other write since: only its own durability keeps it
    Event(op="sweep", seconds=0.0),  # 4: a failed run is not given up again
]
STORIES: Final[dict[str, list[Event]]] = {
    "lost": LOST,
    "full": FULL,
    "full_death": FULL_DEATH,
    "stuck": STUCK,
    "stuck_answered": STUCK_ANSWERED,
    "stuck_off": STUCK,
    "hung": HUNG,
    "gave_up": GAVE_UP,
    "gave_up_late": GAVE_UP_LATE,
    "gave_up_crashed": GAVE_UP_CRASHED,
}


@contextmanager
def story_settings(pool: PoolRunner, name: str) -> Iterator[None]:
    """The pool world's supervisors with story ``name``'s settings (started afresh)."""
    world = pool.world
    base = world.settings
    world.cleanup()
    world.settings = base.with_changes(**SETTINGS[name])
    try:
        yield
    finally:
        world.cleanup()
        world.settings = base


def state_problem(pool: PoolRunner, name: str) -> str | None:
    """Replay story ``name`` (of :data:`SETTINGS`) with its settings; what went otherwise."""
    with story_settings(pool, name):
        if name == "unserved":
            return unserved(pool)
        if name == "unserved_mixed":
            return unserved_mixed(pool)
        if name == "unserved_cut":
            return unserved_cut(pool)
        with hearing(lambda: len(pool.trace)) as said:
            outcome, trace = outcome_and_trace(pool, STORIES[name])
        if isinstance(outcome, str):
            return outcome
        judges = {
            "lost": _judge_lost,
            "full": _judge_full,
            "stuck": _judge_stuck,
            "stuck_answered": _judge_stuck_answered,
            "stuck_off": _judge_stuck_off,
            "hung": _judge_hung,
            "full_death": _judge_full_death,
            "gave_up": _judge_gave_up,
            "gave_up_late": _judge_gave_up_late,
            "gave_up_crashed": _judge_gave_up_crashed,
        }
        found = judges[name](pool, outcome, trace, said)
        return None if found is None else f"{found}\ntrace:\n" + "\n".join(trace)


def _judge_lost(pool: PoolRunner, outcome: Any, trace: list[str], said: Said) -> str | None:
    if "the rival supervisor claimed r0" not in trace[2]:
        return "the rival did not take the stalled worker's expired run"
    lost = at(said, r"worker-lost run=r0 pid=\d+ generation=1$")
    hung = at(said, r"worker-hung run=r0 ")
    if [i for i, _ in lost] != [3]:
        return f"worker-lost said at events {[i for i, _ in lost]}, not once at 3 (its next pass)"
    killed = [(i, line.split()[-2]) for i, line in hung]
    if killed != [(6, "run_lost_ago=13.0s")]:
        return (
            f"the stalled worker killed as lost at (event, measure) {killed}, not once at "
            "event 6 with run_lost_ago=13.0s (a lease and a second after it saw the run "
            "lost; a lease after, it is left alone)"
        )
    claims = sqlfile.rows(pool.conn, "pool_claims_of", {"run": "r0"})
    takers = [(c["generation"], c["owner"].rsplit(":", 1)[0]) for c in claims]
    if [g for g, _ in takers] != [1, 2] or takers[0][1] == takers[1][1]:
        return f"r0 was claimed {takers}: once by the main supervisor, then by the rival only"
    if outcome["r0"]["status"] != "done":
        return f"r0 ended {outcome['r0']['status']}"
    return None


def _judge_full(pool: PoolRunner, outcome: Any, trace: list[str], said: Said) -> str | None:
    if trace[2] != "start r2: created; claimed nothing":
        return f"r2 did not wait for the full pool: {trace[2]!r}"
    if "ended: done; the main supervisor hands on r2" not in trace[6]:
        return f"r2 was not handed on the moment r0's worker was free: {trace[6]!r}"
    sizes = [n for i, name, n, _ in pool.pool_sizes if name == "main" and i <= 8]
    if max(sizes, default=0) != 2:
        return f"the main supervisor's pool sizes after its passes: {sizes}, full at 2"
    if any(outcome[r]["status"] != "done" for r in ("r0", "r1", "r2")):
        return f"not every run is done: {[outcome[r]['status'] for r in ('r0', 'r1', 'r2')]}"
    return None


def _judge_stuck(pool: PoolRunner, outcome: Any, trace: list[str], said: Said) -> str | None:
    stuck = at(said, r"worker-stuck run=r0 pid=\d+ no_progress_for=2\.0s stuck_after=1s ")
    kills = at(said, "worker-(stuck|hung) ")
    if [i for i, _ in kills] != [3] or len(stuck) != 1:
        return f"the stuck worker was killed at {kills}: once, at event 3 (2 s)"
    if "claimed r0" not in trace[3]:
        return f"the stuck worker's run was not claimed again in that pass: {trace[3]!r}"
    if outcome["r0"]["status"] != "done":
        return f"r0 ended {outcome['r0']['status']}"
    return None


def _judge_full_death(pool: PoolRunner, outcome: Any, trace: list[str], said: Said) -> str | None:
    sizes = [n for _, name, n, _ in pool.pool_sizes if name == "main"]
    if max(sizes, default=3) > 2 or any(outcome[r]["status"] != "done" for r in RUN_IDS):
        return f"the pool held {sizes} workers after its passes (two at most), runs {outcome}"
    return None


def _judge_hung(pool: PoolRunner, outcome: Any, trace: list[str], said: Said) -> str | None:
    kills = [(i, line.split()[1:4:2]) for i, line in at(said, "worker-(stuck|hung) ")]
    if kills != [(3, ["run=r0", "lease_expired_ago=0.0s"])]:
        return f"workers killed at (event, run, measure) {kills}: r0's once, at event 3"
    if "claimed r0" not in trace[3] or outcome["r0"]["status"] != "done":
        return f"r0 not claimed again in that pass, or not done: {trace[3]!r}"
    return None


def _judge_stuck_off(pool: PoolRunner, outcome: Any, trace: list[str], said: Said) -> str | None:
    kills = at(said, "worker-(stuck|hung) ")
    if kills or outcome["r0"]["status"] != "done":
        return f"stuck_after=0 (no bound): killed {kills}, r0 {outcome['r0']['status']}"
    return None


def _judge_stuck_answered(
    pool: PoolRunner, outcome: Any, trace: list[str], said: Said
) -> str | None:
    kills = [(i, line.split()[1:4:2]) for i, line in at(said, "worker-(stuck|hung) ")]
    if kills != [(7, ["run=r0", "no_progress_for=2.0s"])]:
        return (
            f"workers killed at (event, run, measure) {kills}: r0's once, at event 7, two "
            "seconds after its own latest answer (not its earlier progress, nor r1's)"
        )
    if "claimed r0" not in trace[7]:
        return f"the stuck worker's run was not claimed again in that pass: {trace[7]!r}"
    if (outcome["r0"]["status"], outcome["r1"]["status"]) != ("done", "done"):
        return f"r0 ended {outcome['r0']['status']}, r1 {outcome['r1']['status']}"
    return None


def _judge_gave_up(pool: PoolRunner, outcome: Any, trace: list[str], said: Said) -> str | None:
    gave_up = [(i, line.split()[1]) for i, line in at(said, r"gave-up run=")]
    if gave_up != [(10, "run=r0")]:
        return (
            f"runs given up at (event, run) {gave_up}, not r0 once at event 10 (two claims "
            "since its progress, the first 5 s ago, its lease free)"
        )
    backoffs = [(i, line.split()[1:]) for i, line in at(said, r"backoff run=")]
    wanted = [(5, ["run=r0", "attempt=2", f"until={EPOCH}01.000+00:00"])]
    wanted.append((9, ["run=r0", "attempt=3", f"until={EPOCH}08.000+00:00"]))
    # r1's worker died with the database (code 4, holding its run): not a crash, it backs off
    wanted.append((14, ["run=r1", "attempt=1", f"until={EPOCH}07.000+00:00"]))
    if backoffs != wanted:
        return f"backoffs said at {backoffs}, not {wanted}"
    if (outcome["r0"]["status"], outcome["r1"]["status"]) != ("failed", "done"):
        return f"r0 ended {outcome['r0']['status']}, r1 {outcome['r1']['status']}"
    return None


def _judge_gave_up_crashed(
    pool: PoolRunner, outcome: Any, trace: list[str], said: Said
) -> str | None:
    gave_up = [(i, line.split()[1]) for i, line in at(said, r"gave-up run=")]
    if gave_up != [(2, "run=r0")] or outcome["r0"]["status"] != "failed":
        return f"given up at {gave_up}, r0 {outcome['r0']['status']}: once, at event 2, kept"
    return None


def _judge_gave_up_late(pool: PoolRunner, outcome: Any, trace: list[str], said: Said) -> str | None:
    gave_up = [(i, line.split()[1]) for i, line in at(said, r"gave-up run=")]
    if gave_up != [(17, "run=r0")]:
        return (
            f"runs given up at (event, run) {gave_up}, not r0 once at event 17: five seconds "
            "after its own first claim since its progress (4 s), not after an earlier claim "
            "of its own (0 s) nor another run's (3 s); never r1 (one claim only)"
        )
    backoffs = [(i, line.split()[1:]) for i, line in at(said, r"backoff run=")]
    wanted = [(10, ["run=r0", "attempt=2", f"until={EPOCH}05.000+00:00"])]
    wanted.append((16, ["run=r0", "attempt=3", f"until={EPOCH}11.500+00:00"]))
    if backoffs != wanted:
        return f"backoffs said at {backoffs}, not {wanted} (r0's, 1 s then 2 s; r1 none)"
    run = Journal(pool.conn).get_run("r0")
    failure = run.failure if run is not None else None
    if failure != "gave up after 3 attempts in 6 s without progress: no reason recorded":
        return f"r0's failure reads {failure!r} (a crash records no reason of its own)"
    if (outcome["r0"]["status"], outcome["r1"]["status"]) != ("failed", "done"):
        return f"r0 ended {outcome['r0']['status']}, r1 {outcome['r1']['status']}"
    return None
