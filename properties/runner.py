"""Run one schedule against a real PostgreSQL, in-process or with real processes.

The runner owns the workers of a schedule. At any moment at most one of them
runs; every other one waits at a gate (a crash point), so what happens depends
on the schedule alone. How each event moves the workers:

- a worker is *active* for its run (the one ``step``/``crash``/``stall`` drive),
  *stalled* (frozen at a gate, not renewing its lease; ``resume`` brings the
  oldest back), or gone;
- ``start``, ``restart`` and a ``sweep`` leave their new worker paused at its first
  gate, after it claimed the run;
- heartbeats are modelled, not threaded: a ``sweep`` first moves the clock
  (``agent_runtime.clock.advance``), then renews the lease of every active
  worker the way its heartbeat would, then claims what expired with the
  supervisor's own ``claim_expired`` query. Stalled and crashed workers do not
  renew, so their runs are taken over;
- every worker's end is judged: a crash the schedule asked for, a fence after a
  takeover, a database error after its connection was dropped, a model error
  after an armed model fault, a cloud error after an armed cloud fault are
  expected; anything else is a violation.

The model calls are attributed as they happen (see :class:`invariants.Ask`):
between two gates of a worker the model's counter for the run moved, so that
worker asked, about the step it last passed ``before_decide`` for.
"""

from __future__ import annotations

import contextlib
import logging
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from agent_runtime import clock, db
from agent_runtime.config import Settings
from agent_runtime.errors import LeaseLost
from agent_runtime.journal import Journal
from agent_runtime.records import Lease

from . import invariants, variants
from .events import RUNS, Event, run_id
from .invariants import Ask, Baseline, Snapshot, Violation
from .pilots import CRASHED, DONE, Exit, Gate, Pilot, Start, ThreadPilot, owner_of
from .remotes import Remotes

log = logging.getLogger(__name__)

LEASE: Final = 12.0  # seconds; a sweep moves the clock this much and one second more
MAX_GATES: Final = 400  # gates one drive may pass before the worker is declared stuck
SETTLE_TRIES: Final = 8  # restarts teardown gives one run before calling it unfinished
DROP_WAIT: Final = 5.0  # seconds a terminated backend may take to disappear

MODEL_ERRORS: Final = frozenset({"MalformedAnswer", "UnknownTool", "InvalidArguments"})
FENCED: Final = frozenset({"LeaseLost", "StaleGeneration"})

# The same settings in both runners; tool_timeout only costs real time in the process
# runner (a dropped answer is waited for), and retries do not back off.
SETTINGS: Final = Settings(
    lease=LEASE,
    heartbeat=3.0,
    tool_timeout=1.0,
    tool_retries=3,
    retry_backoff=0.0,
    model_timeout=10.0,
    max_attempts=1_000_000,  # the sweep never gives up on a run: teardown must finish it
)

Decide = Callable[[Gate], Literal["go", "pause", "crash", "kill"]]


@dataclass(eq=False, kw_only=True)
class WorkerRec:
    label: str
    run: str
    pilot: Pilot
    generation: int | None = None
    state: str = "running"  # running | paused | stalled | exited
    gate: Gate | None = None
    deciding: int | None = None  # the step of the last before_decide passed
    ask: Ask | None = None  # an answer this worker holds and has not journaled
    dropped: bool = False  # the schedule terminated its database connection
    crashed_by_us: bool = False
    exit: Exit | None = None

    @property
    def alive(self) -> bool:
        return self.state != "exited"


@dataclass(kw_only=True)
class Stats:
    examples: int = 0
    events: int = 0
    crashes: int = 0
    restarts: int = 0  # workers started after a crash or takeover (restart, sweep, settle)
    fired: dict[str, int] = field(default_factory=dict)  # crash point -> times fired
    faults: dict[str, int] = field(default_factory=dict)


class ScheduleRunner(ABC):
    """Applies events, keeps the ledgers, checks the invariants. Subclasses make pilots."""

    mode: str = "?"

    def __init__(
        self,
        url: str,
        *,
        variant: str | None = None,
        remotes: Remotes,
        settings: Settings | None = None,
    ) -> None:
        self.url = url
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
        self._baseline: Baseline | None = None
        self._clear()

    # -- lifecycle -----------------------------------------------------------------------------

    def _clear(self) -> None:
        self.workers: list[WorkerRec] = []
        self.started: list[str] = []
        self.active: dict[str, WorkerRec | None] = {}
        self.stalled: dict[str, list[WorkerRec]] = {}
        self.asks: list[Ask] = []
        self.model_seen: dict[str, int] = {}
        self.problems: list[Violation] = []
        self.shadow = invariants.Shadow()
        self.gen_before: dict[str, int] = {}
        self.last: Snapshot | None = None  # the snapshot of the last check, if still current
        self.trace: list[str] = []
        self.bad_answers_issued = 0  # model fault answers armed by the schedule
        self.bad_answers_used = 0  # ... and explained so far
        self.cloud_faults_armed = False

    def reset(self) -> None:
        """A clean slate for the next schedule: no workers, an empty journal, fresh mocks."""
        self.cleanup()
        self.last = None
        self.conn.execute("DELETE FROM runs")
        clock.set_skew(self.conn, 0)
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
        self.conn.close()
        self.remotes.close()

    @abstractmethod
    def _pilot(self, start: Start) -> Pilot: ...

    # -- a whole schedule ----------------------------------------------------------------------

    def baseline(self) -> Baseline:
        """The crash-free run, computed once: start r0, let it finish."""
        if self._baseline is None:
            self.reset()
            self.apply(Event(op="start", run=0))
            self.settle()
            self._baseline = invariants.baseline_of(self.observe(), run_id(0))
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
        return invariants.outcome(self.observe(), list(self.started))

    # -- events --------------------------------------------------------------------------------

    def apply(self, event: Event) -> str:
        self._note_generations()
        self.last = None
        handler = getattr(self, f"_on_{event.op}")
        result: str = handler(event)
        self.trace.append(f"{event}: {result}")
        self.stats.events += 1
        log.debug("event %s -> %s", event, result)
        return result

    def _on_start(self, e: Event) -> str:
        run = e.run_name
        if run in self.started:
            return "skipped (already started)"
        self.started.append(run)
        self.active[run] = None
        self.stalled[run] = []
        return self._launch(Start(run_id=run, label=self._label()))

    def _on_step(self, e: Event) -> str:
        w = self.active.get(e.run_name)
        if w is None:
            return "skipped (no active worker)"
        return self._drive(w, lambda g: "pause" if g.point == "after_confirm" else "go")

    def _on_crash(self, e: Event) -> str:
        w = self.active.get(e.run_name)
        if w is None:
            return "skipped (no active worker)"
        how: Literal["crash", "kill"] = "kill" if e.kill else "crash"

        def match(g: Gate) -> bool:
            return g.point == e.point and (e.seq is None or g.seq == e.seq)

        first = how if w.gate is not None and match(w.gate) else "go"
        result = self._drive(w, lambda g: how if match(g) else "go", first=first)
        return result if w.crashed_by_us else f"{result} (never reached {e.point})"

    def _on_stall(self, e: Event) -> str:
        run = e.run_name
        w = self.active.get(run)
        if w is None:
            return "skipped (no active worker)"

        def match(g: Gate) -> bool:
            return g.point == e.point and (e.seq is None or g.seq == e.seq)

        if w.gate is None or not match(w.gate):
            result = self._drive(w, lambda g: "pause" if match(g) else "go")
            if not w.alive:
                return f"{result} (never reached {e.point})"
        assert w.gate is not None
        self.active[run] = None
        self._freeze(w)
        self.on_event(f"stall at {w.gate.point}")
        return f"{w.label} stalled at {w.gate.point} seq={w.gate.seq}"

    def _on_resume(self, e: Event) -> str:
        run = e.run_name
        if not self.stalled.get(run):
            return "skipped (no stalled worker)"
        w = self.stalled[run].pop(0)
        w.pilot.thaw()
        w.state = "paused"
        result = self._drive(w, lambda g: "pause" if g.point == "after_confirm" else "go")
        if w.alive:
            if self.active.get(run) is None and self._owns(w):
                self.active[run] = w
                return f"{result}, active again"
            self._freeze(w)
        return result

    def _on_restart(self, e: Event) -> str:
        run = e.run_name
        if run not in self.started:
            return "skipped (not started)"
        old = self.active.get(run)
        if old is not None:
            self.active[run] = None
            self._freeze(old, stop=False)  # alive, merely outpaced: a zombie from now on
        self.stats.restarts += 1
        return self._launch(Start(run_id=run, label=self._label(), takeover=True))

    def _on_sweep(self, e: Event) -> str:
        seconds = e.seconds if e.seconds is not None else self.settings.lease + 1
        clock.advance(self.conn, seconds)
        journal = Journal(self.conn)
        for run, w in self.active.items():
            if w is not None and self._generation(w) is not None:
                lease = Lease(run_id=run, owner=w.pilot.owner, generation=self._generation(w) or 0)
                with contextlib.suppress(LeaseLost):
                    journal.renew(lease, self.settings.lease)  # its heartbeat would have
        rows = db.run(
            self.conn,
            "claim_expired",
            {
                "owner": self.supervisor,
                "lease": self.settings.lease,
                "limit": RUNS,
                "max_attempts": self.settings.max_attempts,
            },
        )
        results = []
        for row in rows:
            run = row["id"]
            lease = Lease(run_id=run, owner=row["owner"], generation=row["generation"])
            old = self.active.get(run)
            if old is not None:  # cannot happen while heartbeats renew; keep it honest
                self.active[run] = None
                self._freeze(old, stop=False)
            self.stats.restarts += 1
            results.append(
                f"{run}: " + self._launch(Start(run_id=run, label=self._label(), lease=lease))
            )
        return "claimed " + ("; ".join(results) if results else "nothing")

    def _on_cloud_fault(self, e: Event) -> str:
        knobs = self.remotes.cloud_faults()
        assert e.fault is not None
        if e.fault == "latency":
            self.remotes.set_cloud_faults(latency=e.seconds or 0.0)
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
        stalled = self.stalled.get(run) or []
        w = self.active.get(run) or (stalled[-1] if stalled else None)
        if w is None or w.pilot.backend_pid is None or w.dropped:
            return "skipped (no live worker connection)"
        pid = w.pilot.backend_pid
        self.conn.execute("SELECT pg_terminate_backend(%s)", (pid,))
        deadline = time.monotonic() + DROP_WAIT
        while self.conn.execute("SELECT 1 FROM pg_stat_activity WHERE pid = %s", (pid,)).fetchone():
            if time.monotonic() > deadline:
                raise TimeoutError(f"backend {pid} of {w.label} outlived pg_terminate_backend")
            time.sleep(0.002)
        w.dropped = True
        if isinstance(w.pilot, ThreadPilot):
            w.pilot.dropped = True
        self._count_fault("database connection dropped")
        return f"terminated the connection of {w.label}"

    # -- teardown ------------------------------------------------------------------------------

    def settle(self) -> None:
        """Clear the faults, let every zombie finish or be fenced, then finish every run."""
        self._note_generations()  # a zombie's write from here on is judged like any other
        self._disarm()
        for run in list(self.started):
            while self.stalled.get(run):
                w = self.stalled[run].pop(0)
                w.pilot.thaw()
                w.state = "paused"
                self.trace.append(f"settle {run}: zombie " + self._drive(w, lambda g: "go"))
                self._settle_check()
        for run in list(self.started):
            active = self.active.get(run)
            if active is not None:
                self.trace.append(f"settle {run}: " + self._drive(active, lambda g: "go"))
                self._settle_check()
            for _ in range(SETTLE_TRIES):
                if self._status(run) in ("done", "failed", "cancelled"):
                    break
                self.stats.restarts += 1
                w = self._pilot_rec(Start(run_id=run, label=self._label(), takeover=True))
                self.trace.append(f"settle {run}: restart " + self._drive(w, lambda g: "go"))
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
                r["id"]: r["generation"]
                for r in self.conn.execute("SELECT id, generation FROM runs").fetchall()
            }

    def status(self, run: str) -> str | None:
        """The run's status (from the last check's snapshot when it is current)."""
        if self.last is not None:
            row = self.last.runs.get(run)
            return row.status if row else None
        return self._status(run)

    def _disarm(self) -> None:
        left = self.remotes.model_faults()
        unused = sum(int(left[k]) for k in left)
        self.bad_answers_issued -= unused  # armed but never served: nothing to explain
        self.remotes.set_model_faults(**dict.fromkeys(left, 0))
        self.remotes.set_cloud_faults(fail_before=0, drop_after=0, latency=0.0)

    # -- checks --------------------------------------------------------------------------------

    def observe(self) -> Snapshot:
        return invariants.snapshot(self.conn, self.remotes)

    def check(self) -> None:
        """The invariants after an event; raises the violations found."""
        now = self.observe()
        self.last = now
        found = list(self.problems)
        self.problems.clear()
        found += invariants.no_duplicate_effect(now)
        found += self.shadow.check_and_update(now, self.gen_before)
        found += invariants.no_divergence(now, self.asks)
        invariants.raise_if(found)

    def check_final(self) -> None:
        now = self.observe()
        found = list(self.problems)
        self.problems.clear()
        found += invariants.settled(now, list(self.started), self.baseline(), self.asks)
        for w in self.workers:
            if w.alive:
                found.append(Violation("settled", w.run, None, f"{w.label} is still alive"))
        invariants.raise_if(found)

    # -- driving workers -----------------------------------------------------------------------

    def _label(self) -> str:
        return f"w{len(self.workers) + 1}"

    def _pilot_rec(self, start: Start) -> WorkerRec:
        pilot = self._pilot(start)
        w = WorkerRec(label=start.label, run=start.run_id, pilot=pilot)
        if start.lease is not None:
            w.generation = start.lease.generation
        self.workers.append(w)
        return w

    def _launch(self, start: Start) -> str:
        """A new worker, paused at its first gate; the run's active worker if it got there."""
        w = self._pilot_rec(start)
        result = self._drive(w, lambda g: "pause")
        if w.alive:
            self.active[start.run_id] = w
        return result

    def _drive(self, w: WorkerRec, decide: Decide, *, first: str = "go") -> str:
        """Let ``w`` go from where it waits; ``decide`` what happens at each next gate."""
        if w.state in ("paused", "stalled"):
            w.pilot.thaw()
            if first in ("crash", "kill"):
                assert w.gate is not None
                return self._kill(w, w.gate, first)
            w.pilot.reply("go")
        w.state = "running"
        for _ in range(MAX_GATES):
            message = w.pilot.next()
            self._attribute(w)
            if isinstance(message, Exit):
                return self._ended(w, message)
            self._at_gate(w, message)
            action = decide(message)
            if action == "pause":
                w.state = "paused"
                w.gate = message
                self._generation(w)
                return f"{w.label} at {message.point} seq={message.seq}"
            if action in ("crash", "kill"):
                return self._kill(w, message, action)
            w.pilot.reply("go")
        w.pilot.abandon()
        w.state = "exited"
        self.problems.append(
            Violation("settled", w.run, None, f"{w.label} passed {MAX_GATES} gates without ending")
        )
        return f"{w.label} stuck"

    def _kill(self, w: WorkerRec, gate: Gate, how: str) -> str:
        w.crashed_by_us = True
        w.gate = gate
        w.pilot.reply("kill" if how == "kill" else "crash")
        message = w.pilot.next()
        if not isinstance(message, Exit):
            raise RuntimeError(f"{w.label} went on to {message} after being crashed")
        self.stats.crashes += 1
        self.stats.fired[gate.point] = self.stats.fired.get(gate.point, 0) + 1
        self.on_event(f"crash at {gate.point}")
        self._ended(w, message)
        return f"{w.label} crashed at {gate.point} seq={gate.seq}"

    def _freeze(self, w: WorkerRec, *, stop: bool = True) -> None:
        w.state = "stalled"
        self.stalled.setdefault(w.run, []).append(w)
        if stop:
            w.pilot.freeze()

    def _generation(self, w: WorkerRec) -> int | None:
        if w.generation is None:
            row = self.conn.execute(
                "SELECT max(generation) AS g FROM run_claims WHERE run_id = %s AND owner = %s",
                (w.run, w.pilot.owner),
            ).fetchone()
            w.generation = row["g"] if row else None
        return w.generation

    def _owns(self, w: WorkerRec) -> bool:
        row = self.conn.execute(
            "SELECT owner, generation, status FROM runs WHERE id = %s", (w.run,)
        ).fetchone()
        return bool(
            row
            and row["status"] == "running"
            and row["owner"] == w.pilot.owner
            and row["generation"] == self._generation(w)
        )

    def _status(self, run: str) -> str | None:
        row = self.conn.execute("SELECT status FROM runs WHERE id = %s", (run,)).fetchone()
        return row["status"] if row else None

    def _count_fault(self, label: str) -> None:
        self.stats.faults[label] = self.stats.faults.get(label, 0) + 1
        self.on_event(f"fault: {label}")

    # -- the ask ledger ------------------------------------------------------------------------

    def _attribute(self, w: WorkerRec) -> None:
        count = self.remotes.model_calls(w.run)
        seen = self.model_seen.get(w.run, 0)
        for number in range(seen + 1, count + 1):
            if w.ask is not None:
                self._lose(w.ask, "asked again before journaling the previous answer", False)
            ask = Ask(run=w.run, seq=w.deciding, number=number, worker=w.label)
            self.asks.append(ask)
            w.ask = ask
        self.model_seen[w.run] = max(seen, count)

    def _at_gate(self, w: WorkerRec, gate: Gate) -> None:
        if gate.point == "before_decide":
            w.deciding = gate.seq
        elif gate.point == "after_decide":
            if w.ask is not None and w.ask.seq == gate.seq:
                w.ask.fate = "journaled"
                w.ask = None
            w.deciding = None
        elif gate.point != "after_decide_before_journal" and w.ask is not None:
            self._lose(w.ask, f"went on to {gate.point} without journaling it", False)
            w.ask = None

    @staticmethod
    def _lose(ask: Ask, reason: str, excused: bool) -> None:
        ask.fate = "lost"
        ask.reason = reason
        ask.excused = excused

    def _ended(self, w: WorkerRec, message: Exit) -> str:
        w.state = "exited"
        w.exit = message
        if self.active.get(w.run) is w:
            self.active[w.run] = None
        if w in self.stalled.get(w.run, []):
            self.stalled[w.run].remove(w)
        expected = self._expected(w, message)
        if w.ask is not None:
            self._lose(w.ask, f"{w.label} ended: {message.kind}", expected)
            w.ask = None
        w.deciding = None
        if not expected:
            detail = f": {message.detail}" if message.detail else ""
            self.problems.append(
                Violation(
                    "worker",
                    w.run,
                    w.gate.seq if w.gate else None,
                    f"{w.label} stopped with {message.kind}{detail}",
                )
            )
        return f"{w.label} ended: {message.kind}"

    def _expected(self, w: WorkerRec, message: Exit) -> bool:
        kind = message.kind
        if kind == DONE:
            return True
        if kind == CRASHED:
            return w.crashed_by_us
        if kind in FENCED:
            gen = self._generation(w)
            row = self.conn.execute(
                "SELECT generation FROM runs WHERE id = %s", (w.run,)
            ).fetchone()
            return bool(row and gen is not None and row["generation"] > gen)
        if kind == "DatabaseError":
            return w.dropped
        if kind in MODEL_ERRORS:
            left = self.remotes.model_faults()
            served = self.bad_answers_issued - sum(int(left[k]) for k in left)
            if served > self.bad_answers_used:
                self.bad_answers_used += 1
                return True
            return False
        if kind == "RemoteUnavailable":
            return self.cloud_faults_armed
        return False
