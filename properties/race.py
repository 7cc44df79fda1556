"""The ``race`` event: a claim goes ahead while a fenced write of a call is inside its statement.

Workers run one at a time and stop only at gates between statements, so no schedule can
otherwise let a claim commit while a fenced write is in flight: the one interleaving a
fenced write's row lock (``FOR SHARE`` in ``record_intent``, ``record_send``,
``record_confirm``) exists for. This event makes it, deterministically:

1. the run's active worker is let go from its gate with its database backend *armed*: its
   next write of a call stops inside its statement, after the fence read and before the
   row is written (``properties/sql/race.sql``: a trigger on ``tool_calls`` that waits on
   an advisory lock the runner holds). If it reaches a gate (or ends) first, it pauses there
   and nothing else happens;
2. a new worker takes the run over (a restart: the same claim as ``restart``), on its own
   connection and thread;
3. the runner waits until the claim has committed (the new worker reached its first gate)
   or waits on a lock (``pg_stat_activity``): with the run row locked ``FOR SHARE`` by the
   held write, the claim cannot commit before it;
4. the gate opens; the old worker goes on to its next gate, the new one to its first.

When the claim committed first, nothing the old worker writes after it may land: its fence
read the run before the claim, and only the row lock makes such a write wait and read the
run again (then it is refused). A call row or run row it changed anyway is an
``overtaken_write``. Afterwards the old worker is an outpaced zombie, as after ``restart``.

In-process only (the pilots' threads are what the runner can watch without blocking); the
process runners skip it. :class:`RacingClaims` adds the same for two claims
(``race_claim``).
"""

from __future__ import annotations

import contextlib
import threading
import time
from abc import abstractmethod
from collections.abc import Callable
from typing import Any, Final

from agent_runtime.errors import RunUnavailable
from agent_runtime.loop.claiming import claim_run
from agent_runtime.store import db
from agent_runtime.store.records import Lease, RunTask

from . import sqlfile
from .driving import Driving, WorkerRec
from .events import Event
from .pilots import Start
from .thread_pilot import ThreadPilot
from .variants import Variant
from .violations import Violation

RACE_WAIT: Final = 60.0  # seconds a held write or a claim may take to get where it goes
POLL: Final = 0.001  # seconds between two looks at the workers and their backends


class Racing(Driving):
    """The ``race`` event, a base of the schedule runner."""

    url: str

    @abstractmethod
    def _start(self, run: str, **how: Any) -> Start: ...

    def _install_race_gate(self) -> None:
        sqlfile.rows(self.conn, "install_race_gate")
        sqlfile.rows(self.conn, "install_claim_gate")

    def _on_race(self, e: Event) -> str:
        w = self.active.get(e.run_name)
        if w is None:
            return "skipped (no active worker)"
        if not isinstance(w.pilot, ThreadPilot) or w.state != "paused":
            return "skipped (in-process workers at a gate only)"
        # the gate's lock on a connection of its own, made now: a database crash since the
        # last race would have broken a kept one, and races are few
        with contextlib.closing(db.connect(self.url, application_name="properties.race")) as gate:
            return self._race(w, w.pilot, gate)

    def _race(self, w: WorkerRec, pilot: ThreadPilot, gate: db.Connection) -> str:
        run = w.run
        pid = pilot.backend_pid
        sqlfile.rows(gate, "arm_race_gate", {"pid": pid})
        try:
            w.state = "running"
            self.moved.add(w.label)
            pilot.reply("go")
            if not until(lambda: pilot.arrived() or waits_on(gate, pid) == "advisory"):
                raise TimeoutError(f"{w.label} neither wrote a call nor reached a gate")
            if pilot.arrived():  # no write of a call before its next gate: it waits there
                return f"nothing held; {self._drive(w, lambda g: 'pause')}"
            self._wait(w, frozen=False)  # outpaced by the claim below, alive
            self.stats.restarts += 1
            new = self._pilot_rec(self._start(run, takeover=True))
            assert isinstance(new.pilot, ThreadPilot)
            rival = new.pilot
            if not until(lambda: rival.arrived() or waits_on(gate, rival.backend_pid) == "Lock"):
                raise TimeoutError(f"{new.label}'s claim neither committed nor waited")
            marks = self._claimed_first(w, rival)
        finally:
            sqlfile.rows(gate, "open_race_gate", {"pid": pid})
        held = self._drive(w, lambda g: "pause")
        landed = self._landed(new)
        if marks is not None:
            self._judge_overtaken(w, marks)
        how = "claim committed first" if marks is not None else "claim waited"
        return f"{w.label} held in a write, {new.label} claims ({how}): {held}; {landed}"

    def _claimed_first(self, w: WorkerRec, rival: ThreadPilot) -> db.Row | None:
        """The run's marks if the claim committed while ``w``'s write was held, else None."""
        if not rival.arrived():
            return None  # it waits on the row lock the held write took
        marks = sqlfile.one(self.conn, "race_marks", {"run": w.run})
        if marks is None or marks["generation"] == self._generation(w):
            return None  # the claim ended without taking the run
        return marks

    def _judge_overtaken(self, w: WorkerRec, before: db.Row) -> None:
        after = sqlfile.one(self.conn, "race_marks", {"run": w.run})
        if after == before:
            return
        self.problems.append(
            Violation(
                "overtaken_write",
                w.run,
                None,
                f"{w.label} (generation {self._generation(w)}) wrote after generation "
                f"{before['generation']}'s claim had committed (its fence read the run "
                "before the claim, and nothing made it wait and read again: a fenced write "
                f"must lock the run row it reads): {_diff(before, after)}",
            )
        )


class RacingClaims(Racing):
    """The ``race_claim`` event: a restart's claim is held inside its statement, after it
    updated (and locked) the run row, before its commit; meanwhile the runner takes the run
    over too (``claim_run`` with ``takeover``, as the supervisor would, on a connection and a
    thread of its own: a worker's would wait first at its ``create_run``, whose unique check
    meets the held update). That claim read the run as the first found it: with ``FOR
    UPDATE`` it waits for the first's commit and reads the run again (another owner now: the
    takeover is refused); without, only its update waits, and it takes the run a second time
    from the owner the first already replaced -- a ``double_claim``. A claim that wins is
    handed to a new worker, which adopts it."""

    supervisor: str
    variant: Variant

    @abstractmethod
    def _advance(self, seconds: float) -> None: ...

    sweep_params: Callable[[], dict[str, Any]]  # the sweep's parameters (Settling's)

    def _on_race_claim(self, e: Event) -> str:
        w = self.active.get(e.run_name)
        if w is None or w.state != "paused" or not isinstance(w.pilot, ThreadPilot):
            return "skipped (in-process workers at a gate only)"
        with contextlib.closing(db.connect(self.url, application_name="properties.race")) as gate:
            return self._race_claims(w, gate, e.seconds)

    def _race_claims(self, w: WorkerRec, gate: db.Connection, seconds: float | None) -> str:
        generation = self._generation(w)
        self._wait(w, frozen=False)  # outpaced by the claims below, alive
        if seconds:  # nobody beats: the lease runs out, and the second claim is the sweep's
            self._advance(seconds)
        sqlfile.rows(gate, "arm_claim_gate")
        second: _Claim | None = None
        try:
            self.stats.restarts += 1
            rec = self._pilot_rec(self._start(w.run, takeover=True))
            first = rec.pilot
            assert isinstance(first, ThreadPilot)
            if not until(
                lambda: first.arrived() or waits_on(gate, first.backend_pid) == "advisory"
            ):
                raise TimeoutError(f"{rec.label}'s claim neither ended nor was held")
            if not first.arrived():  # held inside its claim: the runner's claim now
                second = _Claim(self, w.run, sweep=bool(seconds))
                claim = second
                if not until(lambda: claim.done() or waits_on(gate, claim.pid) == "Lock"):
                    raise TimeoutError("the runner's claim neither ended nor waited")
                claim.waited = not claim.done()
        finally:
            sqlfile.rows(gate, "open_claim_gate")
        results = [self._landed(rec)]
        if second is not None:
            leases = second.result()
            how = f"the {second.what} {'waited, then' if second.waited else 'did not wait,'}"
            if not leases:
                results.append(f"{how} claimed nothing")
            for lease, task in leases:
                now = self.active.get(lease.run_id)
                if now is not None:
                    self._wait(now, frozen=False)
                self.stats.restarts += 1
                launched = self._launch(self._start(lease.run_id, lease=lease, task=task))
                results.append(f"{how} claimed {lease.run_id}: {launched}")
        self._judge_claims(w, generation)
        return "; ".join(results)

    def _judge_claims(self, w: WorkerRec, generation: int | None) -> None:
        claims = sqlfile.rows(self.conn, "claims_after", {"run": w.run, "generation": generation})
        takers = [c for c in claims if c["previous_owner"] == w.pilot.owner]
        if len(takers) < 2:
            return
        self.problems.append(
            Violation(
                "double_claim",
                w.run,
                None,
                f"{len(takers)} claims took the run from {w.label} (generation {generation}): "
                + ", ".join(f"generation {c['generation']} by {c['owner']}" for c in takers)
                + "; a later one read the run before the first committed, and nothing made it "
                "wait and read again (a claim must lock the run row it reads)",
            )
        )


_How = Callable[["RacingClaims", str], None]


class _Claim:
    """The runner's claim, in a thread of its own on a connection of its own: a takeover of
    ``run`` (the runtime's ``claim_run``) or the supervisor's sweep (``claim_expired``); the
    thread answers the leases it took, each with its run's agent and input."""

    def __init__(self, runner: RacingClaims, run: str, *, sweep: bool) -> None:
        self._conn = db.connect(runner.url, application_name="properties.race")
        self.pid = self._conn.info.backend_pid
        self.what = "sweep" if sweep else "runner's takeover"
        self.waited = False  # its claim waited on a lock before it ended
        self._leases: list[tuple[Lease, RunTask]] = []
        self._error: BaseException | None = None  # what the claim raised, the runner's to raise
        how = self._sweep if sweep else self._takeover
        self._thread = threading.Thread(target=self._run, args=(how, runner, run), daemon=True)
        self._thread.start()

    def _run(self, how: _How, runner: RacingClaims, run: str) -> None:
        try:
            how(runner, run)
        except RunUnavailable:  # the takeover refused: the run has another live owner now
            pass
        except BaseException as exc:
            self._error = exc

    def _takeover(self, runner: RacingClaims, run: str) -> None:
        journal = runner.variant.journal(self._conn)
        owner = f"{runner.supervisor}:{run}"  # as the supervisor names its claims
        lease = claim_run(journal, run, owner, runner.settings.lease, takeover=True)
        row = sqlfile.one(self._conn, "task_of", {"run": run})
        if lease is not None and row is not None:
            self._leases.append((lease, RunTask(agent=row["agent"], input=row["input"])))

    def _sweep(self, runner: RacingClaims, run: str) -> None:
        rows = runner.variant.claim(self._conn, runner.sweep_params())
        self._leases = [
            (
                Lease(run_id=r["id"], owner=r["owner"], generation=r["generation"]),
                RunTask(agent=r["agent"], input=r["input"]),
            )
            for r in sorted(rows, key=lambda r: r["id"])
        ]

    def done(self) -> bool:
        return not self._thread.is_alive()

    def result(self) -> list[tuple[Lease, RunTask]]:
        self._thread.join(RACE_WAIT)
        self._conn.close()
        if self._error is not None:
            raise self._error
        return self._leases


def until(ready: Callable[[], bool]) -> bool:
    """Whether ``ready`` came true within :data:`RACE_WAIT` (another thread's or backend's
    work getting where it goes: a bound on real time, never an expiry)."""
    deadline = time.monotonic() + RACE_WAIT
    while not ready():
        if time.monotonic() > deadline:
            return False
        time.sleep(POLL)
    return True


def waits_on(conn: db.Connection, pid: int | None) -> str | None:
    """What backend ``pid`` waits for: ``advisory`` at the gate, ``Lock`` on a row or a
    transaction, None if it waits for neither."""
    row = sqlfile.one(conn, "backend_waits", {"pid": pid})
    if row is None or row["wait_event_type"] != "Lock":
        return None
    return "advisory" if row["wait_event"] == "advisory" else "Lock"


def _diff(before: db.Row, after: db.Row | None) -> str:
    if after is None:
        return "the run is gone"
    changed = [
        f"{key} {before[key]} -> {after[key]}"
        for key in before
        if key != "calls" and before[key] != after[key]
    ]
    # each call as written: seq, state, generation, confirm_generation, sends, lands_by
    changed += [f"call {c}" for c in after["calls"] if c not in before["calls"]]
    return "; ".join(changed)
