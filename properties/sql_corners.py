"""The journal's statements where two writers meet, or a writer comes late (the ``api``
check's fourth part): moments no schedule reaches, since a schedule's events are one at a
time and every gate sits between two statements, never inside one.

- **Another transaction holds the row.** A cancel that waited for a worker's completion
  finds the run done and leaves it so; a retry that waited for a claim finds the lease
  live and leaves it; a sweep's give-up skips a run another supervisor is claiming rather
  than wait for it (``FOR UPDATE`` re-reads the row a statement waited for; ``SKIP
  LOCKED`` never waits).
- **The writer is late.** A zombie whose run an operator retried (the owner cleared, the
  generation kept) may not send, look, park or adopt; a claim that proved one owner dead
  does not take the run from the worker that adopted it since; a supervisor's late
  adoption or release names a generation that has passed (its claim token is reused by
  its next claim of the run) and changes nothing; a look at a call's landing reads that
  run's call, not another's at the same step.
- **The operator names the wrong thing.** A resolve of a call that is not in doubt is
  refused and changes nothing; a resolve of a failed run's call leaves the run failed.
- **The watchdog's run is gone or was retried.** Its check says nothing yet and raises
  nothing (a cancelled run pruned under a hung worker; a retried one).

Each story sets the journal up through the runtime's own API (workers crashed at named
points, claims, operator actions), on the frozen clock; where two writers meet, the
second waits in a thread until the database says it waits for the first's lock.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, Final

from agent_runtime.errors import AgentRuntimeError, LeaseLost
from agent_runtime.operator.actions import cancel_run, resolve_call, retry_run
from agent_runtime.store import db
from agent_runtime.store.journal import Journal
from agent_runtime.store.records import Lease
from agent_runtime.supervisor.takeback import Watchdog
from agent_runtime.supervisor.workerpool import WorkerProcess

from . import sqlfile
from .agents import suite_agents
from .api_steps import crash_run, resume_run, run_stories
from .race import until, waits_on
from .runner import LEASE
from .runners import InProcessRunner

LOCK_WAIT: Final = 10.0  # seconds the second writer may take once the first committed
SKIP_WAIT: Final = "200ms"  # a give-up that waits this long for a locked run waited


def check_races(runner: InProcessRunner) -> list[str]:
    """What of the list above does not hold, on ``runner``'s database and remotes."""
    stories: tuple[Callable[[InProcessRunner], list[str]], ...] = (
        _cancel_meets_finish,
        _retry_meets_claim,
        _give_up_skips,
        _zombie_of_a_retry,
        _stale_dead_owner,
        _late_supervisor,
        _landing_of_this_run,
        _resolve_wrong_call,
        _resolve_failed_run,
        _watchdog_without_holder,
    )
    return run_stories(runner, stories)


def _second_writer(
    runner: InProcessRunner,
    first: Callable[[db.Connection], object],
    second: Callable[[db.Connection], object],
) -> object:
    """``first`` in an open transaction, then ``second`` on another connection once the
    database says it waits for the first's lock (or it ended), then the commit: what
    ``second`` returned, or the runtime error it raised."""
    one, two = db.connect(runner.url), db.connect(runner.url)
    got: list[object] = []

    def run_second() -> None:
        try:
            got.append(second(two))
        except AgentRuntimeError as exc:
            got.append(exc)

    try:
        with one.transaction():
            first(one)
            thread = threading.Thread(target=run_second, daemon=True)
            thread.start()
            pid = two.info.backend_pid  # the first commits once the second waits (or ended)
            until(lambda: not thread.is_alive() or waits_on(runner.conn, pid) == "Lock")
        thread.join(LOCK_WAIT)
        return got[0] if got else "the second writer never returned"
    finally:
        one.close()
        two.close()


def _cancel_meets_finish(runner: InProcessRunner) -> list[str]:
    journal = Journal(runner.conn)
    journal.create_run("race-cancel", "provisioning", None)
    lease = journal.claim("race-cancel", "host:1:done", LEASE)
    assert lease is not None
    got = _second_writer(
        runner,
        lambda conn: Journal(conn).finish(lease, "finished"),
        lambda conn: cancel_run(conn, "race-cancel", "too late"),
    )
    run = journal.require_run("race-cancel")
    if run.status != "done":
        return [f"a cancel that waited for the run's completion left it {run.status} ({got!r})"]
    return []


def _retry_meets_claim(runner: InProcessRunner) -> list[str]:
    journal = Journal(runner.conn)
    journal.create_run("race-retry", "provisioning", None)
    assert journal.claim("race-retry", "host:1:gone", 0.0) is not None  # run out at once
    taken: list[Lease] = []

    def claim(conn: db.Connection) -> None:
        lease = Journal(conn).claim("race-retry", "host:2:live", LEASE)
        assert lease is not None
        taken.append(lease)

    got = _second_writer(runner, claim, lambda conn: retry_run(conn, "race-retry"))
    run = journal.require_run("race-retry")
    if run.owner != "host:2:live" or not isinstance(got, AgentRuntimeError):
        return [
            f"a retry that waited for a claim left the run held by {run.owner} at "
            f"generation {run.generation} ({got!r}): a live lease is never retried"
        ]
    return []


def _give_up_skips(runner: InProcessRunner) -> list[str]:
    journal = Journal(runner.conn)
    journal.create_run("race-spent", "provisioning", None)
    assert journal.claim("race-spent", "host:1:gone", 0.0) is not None  # one attempt, out
    limits = {"max_attempts": 1, "give_up_after": 0.0}

    def give_up(conn: db.Connection) -> object:
        sqlfile.rows(conn, "lock_timeout", {"wait": SKIP_WAIT})
        return [row["id"] for row in db.run(conn, "give_up_exhausted", limits)]

    got = _second_writer(
        runner, lambda conn: sqlfile.rows(conn, "lock_run", {"run": "race-spent"}), give_up
    )
    if got != []:
        return [f"a give-up beside another supervisor's claim of the run said {got!r}"]
    return []


def _zombie_of_a_retry(runner: InProcessRunner) -> list[str]:
    """The support run's email is an intent (a checked call) when its worker stalls past
    its lease; an operator retries the run; the worker wakes and writes."""
    run = "race-zombie"
    support = suite_agents(runner.remotes.support_url)["support"]
    if not crash_run(runner, support, run, "after_intent", 2):
        return [f"{run}: the worker never reached after_intent of step 2"]
    journal = Journal(runner.conn)
    zombie = _held(journal, run)
    call = journal.history(run).calls[2]
    runner._advance(LEASE + 1.0)
    retry_run(runner.conn, run)
    writes: dict[str, Callable[[], object]] = {
        "send": lambda: journal.record_send(zombie, call, None),
        "look": lambda: journal.landing_wait(zombie, call),
        "park": lambda: journal.park(zombie, "a zombie's park"),
        "adopt": lambda: journal.adopt(zombie, "host:9:adopter"),
    }
    return [
        f"the worker of a retried run (its owner cleared, generation {zombie.generation} "
        f"kept) could still {what}"
        for what, write in writes.items()
        if not _refused(write)
    ]


def _held(journal: Journal, run: str) -> Lease:
    """The lease ``run`` is held by now (its crashed worker's)."""
    held = journal.require_run(run)
    assert held.owner is not None, f"{run} is not held"
    return Lease(run_id=run, owner=held.owner, generation=held.generation)


def _refused(write: Callable[[], object]) -> bool:
    try:
        write()
    except LeaseLost:
        return True
    return False


def _stale_dead_owner(runner: InProcessRunner) -> list[str]:
    """A claimer read the run held by A and proved A dead; B adopted the claim since."""
    journal = Journal(runner.conn)
    journal.create_run("race-dead", "provisioning", None)
    claimed = journal.claim("race-dead", "host:1:claimer", LEASE)
    assert claimed is not None
    journal.adopt(claimed, "host:2:adopter")
    taken = journal.claim(
        "race-dead",
        "host:3:taker",
        LEASE,
        dead_owner="host:1:claimer",
        dead_generation=claimed.generation,
    )
    if taken is not None:
        return [
            "a claim that proved the claimer dead took the run from the worker that "
            "adopted it since (alive, never proved dead)"
        ]
    return []


def _late_supervisor(runner: InProcessRunner) -> list[str]:
    """A supervisor's claim token names the run, so its next claim reuses it: a worker
    that adopts the earlier claim, and a release of the earlier generation, come late."""
    journal = Journal(runner.conn)
    journal.create_run("race-late", "provisioning", None)
    token = "host:1:supervisor:race-late"
    first = journal.claim("race-late", token, 0.0)
    second = journal.claim("race-late", token, LEASE)
    assert first is not None and second is not None
    problems = []
    if not _refused(lambda: journal.adopt(first, "host:2:late-worker")):
        problems.append(
            f"a worker adopted generation {first.generation}'s claim at "
            f"generation {second.generation}"
        )
    params = {"run": "race-late", "generation": first.generation, "delay": 0.0, "reason": None}
    if db.run(runner.conn, "expire_lease_of", params):
        problems.append(
            f"a release of generation {first.generation} freed generation "
            f"{second.generation}'s lease"
        )
    return problems


def _landing_of_this_run(runner: InProcessRunner) -> list[str]:
    """Two runs' emails are intents at step 2, a second apart: each run's look reads its
    own call's landing (the later one's a second further away)."""
    support = suite_agents(runner.remotes.support_url)["support"]
    runs = ("race-land-a", "race-land-b")
    for run in runs:
        if run == runs[1]:
            runner._advance(1.0)
        if not crash_run(runner, support, run, "after_intent", 2):
            return [f"{run}: the worker never reached after_intent of step 2"]
    journal = Journal(runner.conn)
    waits: dict[str, float] = {}
    for run in runs:
        waits[run] = journal.landing_wait(_held(journal, run), journal.history(run).calls[2])
    if waits[runs[0]] <= 0 or abs(waits[runs[1]] - waits[runs[0]] - 1.0) > 1e-6:
        return [f"two runs' calls at one step, sent a second apart, wait {waits}"]
    return []


def _resolve_wrong_call(runner: InProcessRunner) -> list[str]:
    """The once email (step 2) is in doubt and parks the run; the operator names step 0,
    the lookup, settled long ago."""
    run = "race-resolve"
    once = suite_agents(runner.remotes.support_url)["once"]
    if not crash_run(runner, once, run, "after_intent", 2):
        return [f"{run}: the worker never reached after_intent of step 2"]
    resume_run(runner, once, run)
    journal = Journal(runner.conn)
    before = journal.history(run)
    try:
        resolve_call(runner.conn, run, 0, "confirm", result={"operator": "wrong step"})
        said = "it was taken"
    except AgentRuntimeError as exc:
        said = f"{type(exc).__name__}"
    after = journal.history(run)
    status = journal.require_run(run).status
    if after.calls != before.calls or status != "needs_attention":
        return [f"a resolve of a settled call ({said}) changed the calls or left the run {status}"]
    return []


def _resolve_failed_run(runner: InProcessRunner) -> list[str]:
    """The server's creation is an intent when the run is failed (given up); the operator
    confirms the call: the run stays failed until a retry."""
    run = "race-failed"
    provisioning = suite_agents(runner.remotes.support_url)["provisioning"]
    if not crash_run(runner, provisioning, run, "after_intent", 0):
        return [f"{run}: the worker never reached after_intent of step 0"]
    journal = Journal(runner.conn)
    journal.fail(_held(journal, run), "given up")
    resolve_call(runner.conn, run, 0, "confirm", result={"id": "srv-by-operator"})
    status = journal.require_run(run).status
    return [] if status == "failed" else [f"a resolve of a failed run's call left it {status}"]


def _watchdog_without_holder(runner: InProcessRunner) -> list[str]:
    """A busy worker's run was retried (owner cleared), and another's is gone (cancelled
    and pruned): the watchdog's first look at them kills nothing and raises nothing."""
    journal = Journal(runner.conn)
    journal.create_run("race-watched", "provisioning", None)
    lease = journal.claim("race-watched", "host:1:hung", 0.0)
    assert lease is not None
    retry_run(runner.conn, "race-watched")
    gone = Lease(run_id="race-pruned", owner="host:2:hung", generation=3)
    watchdog = Watchdog(lease=LEASE, stuck_after=0.0)
    busy = [WorkerProcess(pid=-1, lease=lease), WorkerProcess(pid=-2, lease=gone)]
    try:
        verdicts: Any = watchdog.check(runner.conn, busy)
    except Exception as exc:  # the supervisor's loop would die with it
        return [f"the watchdog raised {type(exc).__name__}: {exc} on a retried or gone run"]
    return [f"the watchdog's first look killed {verdicts}"] if verdicts else []
