"""Run one schedule against a real PostgreSQL, in-process or with real processes.

The runner owns the workers of a schedule and applies its events one by one
(:mod:`properties.events`); :class:`~properties.driving.Driving` moves the workers. Time
is the database's ``cr_now()``, frozen at the start of every example (``clock.freeze``):
it moves only when a ``tick`` or a ``sweep`` moves it, so a lease expires exactly when the
schedule says, in both runners, however fast the machine is.

Heartbeats are real: a ``tick``, a ``sweep`` or a ``heartbeat`` event makes every live
worker that is not frozen renew through the runtime's own :class:`~agent_runtime.lease.
Heartbeat` (while it waits at a gate, as its thread would). Frozen workers do not renew,
so their runs are taken over once the lease runs out; a zombie's renewal fails and marks it
fenced. A ``db_crash`` stops the suite's own PostgreSQL hard and starts it again: every
connection drops, and what was committed without being flushed is gone.

After every event :meth:`check` takes one snapshot and runs every invariant
(:mod:`properties.invariants`, :mod:`properties.shadow`, :mod:`properties.accounting`)
plus the runner's own: no live lease is claimed, no renewal by a non-owner, no run is
stranded by a lease extended after its owner died, a fenced worker starts nothing.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Iterable
from datetime import UTC, datetime, timedelta
from typing import Any, Final, Literal, Protocol

from agent_runtime import clock, db
from agent_runtime.config import Settings
from agent_runtime.errors import DatabaseError
from agent_runtime.records import Lease

from . import baseline, invariants, sqlfile, variants
from .baseline import Baseline
from .driving import Driving, Stats, WorkerRec
from .events import RUNS, Event, run_id
from .observe import Snapshot, snapshot
from .pilots import Gate, Start, owner_of
from .remotes import Remotes
from .shadow import Shadow
from .violations import Violation, raise_if

log = logging.getLogger(__name__)

LEASE: Final = 12.0  # seconds; a sweep moves the clock this much and one second more
SETTLE_TRIES: Final = 8  # claims teardown gives one run before calling it unfinished
DROP_WAIT: Final = 5.0  # seconds a terminated backend may take to disappear
EPOCH: Final = datetime(2030, 1, 1, tzinfo=UTC)  # where the frozen clock starts each example
AGENTS: Final = ("provisioning",)  # the agents whose runs the suite's sweeps claim
VACUUM_EVERY: Final = 20  # examples between two vacuums of the emptied tables

# The same settings in both runners; tool_timeout only costs real time in the process
# runner (a dropped answer is waited for), and retries do not back off.
SETTINGS: Final = Settings(
    lease=LEASE,
    heartbeat=3.0,
    tool_timeout=1.0,
    tool_retries=2,
    retry_backoff=0.0,
    model_timeout=10.0,
    run_backoff=1.0,  # a run released on a resumable error waits 1, 2, 4, 8, 8... seconds
    run_backoff_cap=8.0,
    max_attempts=1_000_000,  # the sweep never gives up on a run: teardown must finish it
)


class CrashableServer(Protocol):
    """A PostgreSQL the runner may crash (``properties.server.SuiteDatabase``)."""

    def crash(self) -> None:
        """Stop the server hard (no flush, no checkpoint) and start it again."""


class ScheduleRunner(Driving):
    """Applies events, keeps the ledgers, checks the invariants. Subclasses make pilots."""

    mode: str = "?"

    def __init__(
        self,
        url: str,
        *,
        variant: str | None = None,
        remotes: Remotes,
        settings: Settings | None = None,
        server: CrashableServer | None = None,
    ) -> None:
        self.url = url
        self.server = server
        self.variant = variants.get(variant)
        self.remotes = remotes
        self.settings = (settings or SETTINGS).with_changes(
            cloud_url=remotes.cloud_url, model_url=remotes.model_url, database_url=url
        )
        self.conn = db.connect(url, application_name="properties.runner")
        db.ensure_schema(self.conn)
        self.stats = Stats()
        self.on_event: Callable[[str], None] = lambda label: None  # hypothesis.event in tests
        self.supervisor = owner_of("supervisor")
        self.clock_now = EPOCH
        self._baseline: Baseline | None = None
        self._clear()

    # -- lifecycle -----------------------------------------------------------------------------

    def _clear(self) -> None:
        self._clear_workers()
        self.shadow = Shadow()
        self.gen_before: dict[str, int] = {}
        self.last: Snapshot | None = None  # the snapshot of the last check, if still current
        self.trace: list[str] = []
        self.claims_seen: set[tuple[str, int]] = set()
        self.previous: Snapshot | None = None  # the snapshot the last check compared with

    def reset(self) -> None:
        """A clean slate for the next schedule: no workers, an empty journal, fresh mocks."""
        self.cleanup()
        self.last = None
        try:
            sqlfile.rows(self.conn, "reset_journal")
        except DatabaseError:  # another runner (or a replay command) crashed the server
            self._reconnect()
            sqlfile.rows(self.conn, "reset_journal")
        if self.stats.examples % VACUUM_EVERY == 0:
            sqlfile.rows(self.conn, "vacuum_journal")
        clock.freeze(self.conn, EPOCH)
        self.clock_now = EPOCH  # cr_now(): frozen, moved only by _advance
        self.remotes.reset()
        self._clear()
        self.stats.examples += 1

    def cleanup(self) -> None:
        """End every worker still around (abandoned, as a process kill would)."""
        for w in self.workers:
            with contextlib.suppress(Exception):
                w.pilot.thaw()
            w.pilot.abandon()
            w.state = "exited"

    def close(self) -> None:
        self.cleanup()
        with contextlib.suppress(Exception):
            clock.thaw(self.conn)
        self.conn.close()
        self.remotes.close()

    def _reconnect(self) -> None:
        """A new connection of the runner's own, and none of the old ones kept anywhere."""
        with contextlib.suppress(Exception):
            self.conn.close()
        self.conn = db.connect(self.url, application_name="properties.runner")
        self._after_db_crash()

    def _after_db_crash(self) -> None:
        """What a runner must do once every connection died (the in-process pool drains)."""

    # -- a whole schedule ----------------------------------------------------------------------

    def baseline(self) -> Baseline:
        """The crash-free run, computed once: start r0, let it finish."""
        if self._baseline is None:
            self.reset()
            self.apply(Event(op="start", run=0))
            self.settle()
            self._baseline = baseline.baseline_of(self.observe(), run_id(0))
            self.reset()
        return self._baseline

    def replay(self, events: Iterable[Event]) -> dict[str, Any]:
        """Reset, apply and check every event, settle, check the end; the outcome."""
        self.baseline()
        self.reset()
        try:
            for event in events:
                self.apply(event)
                self.check()
            self.settle()
            self.check_final()
            return self.outcome()
        finally:
            self.cleanup()

    def outcome(self) -> dict[str, Any]:
        return baseline.outcome(self.observe(), list(self.started))

    # -- events --------------------------------------------------------------------------------

    def apply(self, event: Event) -> str:
        self._note_generations()
        self.last = None
        handler = getattr(self, f"_on_{event.op}")
        result: str = handler(event)
        self.trace.append(f"{event}: {result}")
        self.stats.events += 1
        self.stats.events_by_op[event.op] = self.stats.events_by_op.get(event.op, 0) + 1
        log.debug("event %s -> %s", event, result)
        return result

    def _on_start(self, e: Event) -> str:
        run = e.run_name
        if run in self.started:
            return "skipped (already started)"
        self.started.append(run)
        self.active[run] = None
        self.waiting[run] = []
        return self._launch(Start(run_id=run, label=self._label()))

    def _on_step(self, e: Event) -> str:
        w = self.active.get(e.run_name)
        if w is None:
            return "skipped (no active worker)"
        return self._drive(w, lambda g: "pause" if g.point == "after_confirm" else "go")

    @staticmethod
    def _at(e: Event) -> Callable[[Gate], bool]:
        return lambda g: g.point == e.point and (e.seq is None or g.seq == e.seq)

    def _on_crash(self, e: Event) -> str:
        w = self.active.get(e.run_name)
        if w is None:
            return "skipped (no active worker)"
        how: Literal["crash", "kill"] = "kill" if e.kill else "crash"
        match = self._at(e)
        first = how if w.gate is not None and match(w.gate) else "go"
        result = self._drive(w, lambda g: how if match(g) else "go", first=first)
        return result if w.crashed_by_us else f"{result} (never reached {e.point})"

    def _to_gate(self, w: WorkerRec, e: Event) -> str | None:
        """Drive ``w`` to the event's gate and pause it there; None if it is there already."""
        match = self._at(e)
        if w.gate is not None and match(w.gate):
            return None
        result = self._drive(w, lambda g: "pause" if match(g) else "go")
        return None if w.alive else f"{result} (never reached {e.point})"

    def _on_pause(self, e: Event) -> str:
        w = self.active.get(e.run_name)
        if w is None:
            return "skipped (no active worker)"
        ended = self._to_gate(w, e)
        if ended is not None:
            return ended
        assert w.gate is not None
        return f"{w.label} waits at {w.gate.point} seq={w.gate.seq}"

    def _on_stall(self, e: Event) -> str:
        w = self.active.get(e.run_name)
        if w is None:
            return "skipped (no active worker)"
        ended = self._to_gate(w, e)
        if ended is not None:
            return ended
        assert w.gate is not None
        self._wait(w, frozen=True)
        self.on_event(f"stall at {w.gate.point}")
        return f"{w.label} stalled at {w.gate.point} seq={w.gate.seq}"

    def _on_resume(self, e: Event) -> str:
        run = e.run_name
        if not self.waiting.get(run):
            return "skipped (no waiting worker)"
        w = self.waiting[run].pop(0)
        result = self._drive(w, lambda g: "pause" if g.point == "after_confirm" else "go")
        if w.alive:
            if self.active.get(run) is None and self._owns(w):
                self.active[run] = w
                return f"{result}, active again"
            self._wait(w, frozen=False)
        return result

    def _on_restart(self, e: Event) -> str:
        run = e.run_name
        if run not in self.started:
            return "skipped (not started)"
        old = self.active.get(run)
        if old is not None:
            self._wait(old, frozen=False)  # alive, merely outpaced: a zombie from now on
        self.stats.restarts += 1
        return self._launch(Start(run_id=run, label=self._label(), takeover=True))

    def _on_tick(self, e: Event) -> str:
        assert e.seconds is not None
        self._advance(e.seconds)
        return self._beat_all()

    def _on_heartbeat(self, e: Event) -> str:
        return self._beat_all(e.run_name)

    def _on_sweep(self, e: Event) -> str:
        seconds = e.seconds if e.seconds is not None else self.settings.lease + 1
        if seconds:
            self._advance(seconds)
        beats = self._beat_all()
        claimed = self._claim_expired()
        results = []
        for lease in claimed:
            old = self.active.get(lease.run_id)
            if old is not None:  # its lease ran out (the claim was checked): outpaced
                self._wait(old, frozen=False)
            self.stats.restarts += 1
            start = Start(run_id=lease.run_id, label=self._label(), lease=lease)
            results.append(f"{lease.run_id}: " + self._launch(start))
        return f"{beats}; claimed " + ("; ".join(results) if results else "nothing")

    def _advance(self, seconds: float) -> None:
        db.run(self.conn, "clock_advance", {"seconds": seconds})  # clock.advance, unread
        self.clock_now += timedelta(seconds=seconds)

    def _claim_expired(self) -> list[Lease]:
        """The supervisor's own claim; a claim of a lease that was live is a violation."""
        before = {row["id"]: row for row in sqlfile.rows(self.conn, "leases")}
        rows = self.variant.claim(
            self.conn,
            {
                "owner": self.supervisor,
                "lease": self.settings.lease,
                "limit": RUNS,
                "max_attempts": self.settings.max_attempts,
                "agents": list(AGENTS),
            },
        )
        for row in rows:
            prior = before.get(row["id"])
            expires = None if prior is None else prior["lease_expires_at"]
            live = expires is not None and prior is not None and expires > prior["now"]
            if prior is not None and prior["owner"] is not None and live:
                self.problems.append(
                    Violation(
                        "live_claim",
                        row["id"],
                        None,
                        f"the sweep claimed the run from {prior['owner']} (generation "
                        f"{prior['generation']}) whose lease was live until {expires:%H:%M:%S} "
                        f"(now {prior['now']:%H:%M:%S}): a sweep may only claim expired leases",
                    )
                )
        for r in rows:
            self.known[r["id"]] = (r["owner"], r["generation"])
        return [Lease(run_id=r["id"], owner=r["owner"], generation=r["generation"]) for r in rows]

    def _on_cloud_fault(self, e: Event) -> str:
        knobs = self.remotes.cloud_faults()
        assert e.fault is not None
        if e.fault == "latency":
            seconds = e.seconds or 0.0
            self.remotes.set_cloud_faults(latency=seconds)
            if seconds >= self.settings.tool_timeout:
                self.cloud_faults_armed = True  # every attempt times out: RemoteUnavailable
        else:
            self.cloud_faults_armed = True
            self.remotes.set_cloud_faults(**{e.fault: int(knobs[e.fault]) + (e.n or 1)})
        self._count_fault(f"cloud {e.fault}")
        return "armed"

    def _on_model_fault(self, e: Event) -> str:
        knobs = self.remotes.model_faults()
        assert e.fault is not None
        self.bad_answers_issued += e.n or 1
        self.remotes.set_model_faults(**{e.fault: int(knobs[e.fault]) + (e.n or 1)})
        self._count_fault(f"model {e.fault}")
        return "armed"

    def _on_drop_connection(self, e: Event) -> str:
        run = e.run_name
        waiting = self.waiting.get(run) or []
        w = self.active.get(run) or (waiting[-1] if waiting else None)
        if w is None or w.pilot.backend_pid is None or w.dropped:
            return "skipped (no live worker connection)"
        pid = w.pilot.backend_pid
        sqlfile.rows(self.conn, "terminate_backend", {"pid": pid})
        deadline = time.monotonic() + DROP_WAIT
        while sqlfile.one(self.conn, "backend_alive", {"pid": pid}) is not None:
            if time.monotonic() > deadline:
                raise TimeoutError(f"backend {pid} of {w.label} outlived pg_terminate_backend")
            time.sleep(0.002)
        self._mark_dropped(w)
        self._count_fault("database connection dropped")
        return f"terminated the connection of {w.label}"

    def _on_db_crash(self, e: Event) -> str:
        if self.server is None:
            return "skipped (this runner's database cannot be crashed)"
        where = ""
        w = self.active.get(e.run_name) if e.run is not None else None
        if e.point is not None and w is not None:
            ended = self._to_gate(w, e)
            if ended is not None:
                return ended
            assert w.gate is not None
            where = f" with {w.label} at {w.gate.point} seq={w.gate.seq}"
        self.conn.close()
        self.server.crash()
        self._reconnect()
        for live in self.workers:
            if live.alive:
                self._mark_dropped(live)
        self.shadow.database_crashed()
        self.stats.db_crashes += 1
        self.on_event("database crash")
        return f"the database crashed and came back{where}"

    def _count_fault(self, label: str) -> None:
        self.stats.count(label)
        self.on_event(f"fault: {label}")

    # -- teardown ------------------------------------------------------------------------------

    def settle(self) -> None:
        """Clear the faults, let every waiting worker go, finish every run through claims."""
        self._note_generations()  # a zombie's write from here on is judged like any other
        self._disarm()
        for run in list(self.started):
            while self.waiting.get(run):
                w = self.waiting[run].pop(0)
                self.trace.append(f"settle {run}: waiting " + self._drive(w, lambda g: "go"))
                self._settle_check()
        for run in list(self.started):
            active = self.active.get(run)
            if active is not None:
                self.trace.append(f"settle {run}: " + self._drive(active, lambda g: "go"))
                self._settle_check()
        for _ in range(SETTLE_TRIES):
            unfinished = [r for r in self.started if self._status(r) in ("pending", "running")]
            if not unfinished:
                return
            # every worker of these is gone: one lease and the longest backoff later, all
            # of them must be claimable
            self._advance(self.settings.lease + self.settings.run_backoff_cap + 1)
            claimed = {lease.run_id: lease for lease in self._claim_expired()}
            for run in unfinished:
                lease = claimed.get(run)
                if lease is None:
                    self.problems.append(
                        Violation(
                            "stranded",
                            run,
                            None,
                            "no live worker holds it, yet a lease and a second later the "
                            "supervisor still cannot claim it",
                        )
                    )
                    start = Start(run_id=run, label=self._label(), takeover=True)
                else:
                    start = Start(run_id=run, label=self._label(), lease=lease)
                self.stats.restarts += 1
                w = self._pilot_rec(start)
                self.trace.append(f"settle {run}: claimed by " + self._drive(w, lambda g: "go"))
                self._settle_check()

    def _settle_check(self) -> None:
        self.check()
        self._note_generations()

    def _note_generations(self) -> None:
        """Each run's generation before the next event: a row older than it is stale."""
        if self.last is not None:
            self.gen_before = {run: row.generation for run, row in self.last.runs.items()}
        else:
            self.gen_before = {
                r["id"]: r["generation"] for r in sqlfile.rows(self.conn, "generations")
            }

    def status(self, run: str) -> str | None:
        """The run's status (from the last check's snapshot when it is current)."""
        if self.last is not None:
            row = self.last.runs.get(run)
            return row.status if row else None
        return self._status(run)

    def _status(self, run: str) -> str | None:
        row = sqlfile.one(self.conn, "status_of", {"run": run})
        return row["status"] if row else None

    def _disarm(self) -> None:
        left = self.remotes.model_faults()
        unused = sum(int(left[k]) for k in left)
        self.bad_answers_issued -= unused  # armed but never served: nothing to explain
        self.remotes.set_model_faults(**dict.fromkeys(left, 0))
        self.remotes.set_cloud_faults(fail_before=0, drop_after=0, latency=0.0)

    # -- checks --------------------------------------------------------------------------------

    def observe(self) -> Snapshot:
        return snapshot(self.conn, self.remotes)

    def check(self) -> None:
        """The invariants after an event; raises the violations found."""
        now = self.observe()
        self.last = now
        self.known = {run: (row.owner, row.generation) for run, row in now.runs.items()}
        found = list(self.problems)
        self.problems.clear()
        found += invariants.no_duplicate_effect(now)
        journaled = [
            (a.run, a.seq) for a in self.asks if a.fate == "journaled" and a.seq is not None
        ]
        unseen = self.shadow.lost_unseen(now, journaled)
        found += self.shadow.check_and_update(now, self.gen_before)
        for run, seq in [*self.shadow.vanished, *unseen]:  # a crash took the decision back
            for ask in self.asks:
                if (ask.run, ask.seq, ask.fate) == (run, seq, "journaled"):
                    ask.lose("its decision was lost in a database crash", True)
        self.shadow.vanished.clear()
        found += invariants.no_divergence(now, self.asks)
        found += invariants.remote_truth(now)
        found += self._lease_checks(now)
        found += self._claim_checks(now)
        found += self._lease_changes(self.previous, now)
        self.previous = now
        self.moved.clear()
        raise_if(found)

    def _lease_checks(self, now: Snapshot) -> list[Violation]:
        """Nothing a fenced worker starts, and no lease kept alive past its owner's death."""
        found: list[Violation] = []
        for w in self.workers:
            if w.fenced_after is not None:
                for a in now.answers:
                    if a.seq > w.fenced_after and a.generation == w.generation and a.run == w.run:
                        found.append(
                            Violation(
                                "fenced_act",
                                w.run,
                                None,
                                f"{w.label} sent {a.key} (answered {a.answer}) after its own "
                                "heartbeat had found the run taken over",
                            )
                        )
                        w.fenced_after = a.seq
            row = now.runs.get(w.run)
            if w.alive or row is None or row.status != "running" or row.owner != w.pilot.owner:
                continue
            if row.generation != w.generation or w.lease_until is None:
                continue
            if row.lease_expires_at is not None and row.lease_expires_at > w.lease_until:
                found.append(
                    Violation(
                        "stranded",
                        w.run,
                        None,
                        f"its owner {w.label} is gone, but its lease was extended to "
                        f"{row.lease_expires_at:%H:%M:%S} past the {w.lease_until:%H:%M:%S} "
                        "its owner last set: nobody else may renew it",
                    )
                )
        return found

    def _lease_changes(self, before: Snapshot | None, now: Snapshot) -> list[Violation]:
        """Between two claims a run's lease changes only by the hand of its owner."""
        found: list[Violation] = []
        if before is None:
            return found
        owners = {w.pilot.owner: w for w in self.workers}
        for run, old in before.runs.items():
            new = now.runs.get(run)
            if new is None or new.generation != old.generation or old.owner is None:
                continue
            same = (new.owner, new.lease_expires_at) == (old.owner, old.lease_expires_at)
            holder = owners.get(old.owner)
            if same or holder is None or holder.label in self.moved:
                continue
            movers = ", ".join(sorted(self.moved)) or "nobody"
            found.append(
                Violation(
                    "lease_integrity",
                    run,
                    None,
                    f"its lease, held by {holder.label} (generation {old.generation}), went from "
                    f"{old.owner} until {old.lease_expires_at} to {new.owner} until "
                    f"{new.lease_expires_at} while only {movers} ran: only the owner may "
                    "renew or let go of its lease",
                )
            )
        return found

    def _claim_checks(self, now: Snapshot) -> list[Violation]:
        """Every claim recorded its reason truthfully (schema.sql, run_claims.reason)."""
        found: list[Violation] = []
        alive = {w.pilot.owner for w in self.workers if w.alive}
        before = self.previous.runs if self.previous is not None else {}
        for c in now.claims:
            if (c.run, c.generation) in self.claims_seen:
                continue
            self.claims_seen.add((c.run, c.generation))
            wrong = ""
            prior = before.get(c.run)
            backoff = prior.lease_expires_at if prior is not None and prior.owner is None else None
            if backoff is not None and backoff > self.clock_now:
                wrong = f"took the run during its backoff (claimable from {backoff:%H:%M:%S})"
            elif c.reason == "expired" and not c.lapsed:
                wrong = f"claimed {c.previous_owner}'s lease as expired while it still ran"
            elif c.reason == "owner_dead" and c.previous_owner in alive:
                wrong = f"recorded {c.previous_owner} as proved dead while its worker lives"
            elif c.reason in ("first", "handed_back") and c.previous_owner is not None:
                wrong = f"recorded a claim from {c.previous_owner} as {c.reason}"
            if wrong:
                found.append(
                    Violation(
                        "claim_truth", c.run, None, f"generation {c.generation}'s claim {wrong}"
                    )
                )
        return found

    def check_final(self) -> None:
        now = self.observe()
        found = list(self.problems)
        self.problems.clear()
        found += baseline.settled(now, list(self.started), self.baseline(), self.asks)
        for w in self.workers:
            if w.alive:
                found.append(Violation("settled", w.run, None, f"{w.label} is still alive"))
        raise_if(found)
