"""Driving the workers of a schedule: one at a time, gate by gate, every move accounted for.

:class:`Driving` is the half of the schedule runner that moves workers. At any moment at
most one worker runs; every other one waits at a gate. A worker is *active* for its run
(the one ``step``/``crash``/``stall`` drive), *waiting* (frozen at a gate by a stall, or
outpaced by a takeover and still alive: a zombie), or gone. Along the way it keeps:

- the model's calls, attributed as they happen (:class:`~properties.accounting.Ask`):
  between two gates of a worker the model's counter for the run moved, so that worker
  asked, about the step it last passed ``before_decide`` for;
- each worker's lease as its claim or its last successful renewal set it, and whether
  its heartbeat found the run taken over (from then on it must start nothing);
- how every worker ended, judged against what the schedule explains.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Final, Literal

from agent_runtime.config import Settings
from agent_runtime.store import db

from . import sqlfile
from .accounting import Ask
from .pilots import Exit, Gate, Pilot, Start
from .reads import desk_reads
from .remotes import Remotes
from .thread_pilot import ThreadPilot
from .violations import Violation

MAX_GATES: Final = 400  # gates one drive may pass before the worker is declared stuck
FENCED: Final = frozenset({"LeaseLost", "StaleGeneration"})
NOBODY_BEATS: Final = "nobody beats"  # a tick, sweep or heartbeat no worker renewed at


Decide = Callable[[Gate], Literal["go", "pause", "crash", "kill"]]


@dataclass(eq=False, kw_only=True)
class WorkerRec:
    label: str
    run: str
    pilot: Pilot
    settings: Settings  # as the runner's were when it started (a configure event's)
    generation: int | None = None
    state: str = "running"  # running | paused | exited
    frozen: bool = False  # stalled: stopped where it stands, its heartbeat too
    gate: Gate | None = None
    deciding: int | None = None  # the step of the last before_decide passed
    ask: Ask | None = None  # an answer this worker holds and has not journaled
    dropped: bool = False  # its database connection went away (terminated, or a crash)
    crashed_by_us: bool = False
    exit: Exit | None = None
    lease_until: datetime | None = None  # as its claim or its last good renewal set it
    # by remote, the last answer (or read) logged when its heartbeat found it fenced
    fenced_after: dict[str, int] | None = None

    @property
    def alive(self) -> bool:
        return self.state != "exited"


@dataclass(kw_only=True)
class Stats:
    examples: int = 0
    events: int = 0
    crashes: int = 0
    restarts: int = 0  # workers started after a crash or takeover (restart, sweep, settle)
    db_crashes: int = 0
    zombies: int = 0  # workers that outlived the loss of their run
    fired: dict[str, int] = field(default_factory=dict)  # crash point -> times fired
    faults: dict[str, int] = field(default_factory=dict)
    events_by_op: dict[str, int] = field(default_factory=dict)

    def count(self, fault: str) -> None:
        self.faults[fault] = self.faults.get(fault, 0) + 1


class Driving(ABC):
    """Moves workers and keeps their ledgers; the schedule runner builds on it."""

    conn: db.Connection
    remotes: Remotes
    settings: Settings
    stats: Stats
    on_event: Callable[[str], None]

    def _clear_workers(self) -> None:
        self.workers: list[WorkerRec] = []
        self.started: list[str] = []
        self.active: dict[str, WorkerRec | None] = {}
        self.waiting: dict[str, list[WorkerRec]] = {}  # frozen or outpaced, oldest first
        self.asks: list[Ask] = []
        self.model_seen: dict[str, int] = {}
        self.problems: list[Violation] = []
        self.moved: set[str] = set()  # labels of the workers that ran since the last check
        # Each run's (owner, generation) as last seen: by the last check's snapshot, or by a
        # claim the runner made or saw since. Only claims change a generation, and the runner
        # sees every one, so this is the run's generation at any moment between two gates.
        self.known: dict[str, tuple[str | None, int]] = {}
        self.bad_answers_issued = 0  # model fault answers armed by the schedule
        self.bad_answers_used = 0  # ... and explained so far
        self.failures_armed = 0  # requests the remotes' knobs were armed to fail, in all
        self.failed_for_good: set[str] = set()  # runs a permanent error failed, as it must

    @abstractmethod
    def _pilot(self, start: Start) -> Pilot:
        """A pilot of the runner's kind (a thread, or a process) for a new worker."""

    @abstractmethod
    def _status(self, run: str) -> str | None:
        """The run's status in the journal right now."""

    # -- workers ------------------------------------------------------------------------------

    def _label(self) -> str:
        return f"w{len(self.workers) + 1}"

    def _pilot_rec(self, start: Start) -> WorkerRec:
        w = WorkerRec(
            label=start.label, run=start.run_id, pilot=self._pilot(start), settings=self.settings
        )
        if start.lease is not None:
            w.generation = start.lease.generation
        self.workers.append(w)
        return w

    def _launch(self, start: Start) -> str:
        """A new worker, paused at its first gate; the run's active worker if it got there."""
        return self._landed(self._pilot_rec(start))

    def _landed(self, w: WorkerRec) -> str:
        """A new worker's first drive: it pauses at its first gate, as the run's active one."""
        result = self._drive(w, lambda g: "pause")
        if w.alive:
            self.active[w.run] = w
            row = sqlfile.one(self.conn, "lease_of", {"run": w.run})
            if row is not None:
                self.known[w.run] = (row["owner"], row["generation"])
                if row["owner"] == w.pilot.owner:
                    w.generation = row["generation"]
                    w.lease_until = row["lease_expires_at"]
                self._check_adopted(w, row["owner"], row["generation"])
        return result

    def _check_adopted(self, w: WorkerRec, owner: str | None, generation: int) -> None:
        """**claim_owner**: a worker started on a lease claimed for it works under its own
        token from its first gate on (``adopt_lease``), so that its pid, not its claimer's,
        tells whether the run's owner lives (a worker that adopted only when its token
        sorted before its claimer's, ``!=`` as ``>``, passed the suite: de933ca4)."""
        claimed = w.pilot.start.lease
        if claimed is not None and generation == claimed.generation and owner != w.pilot.owner:
            self.problems.append(
                Violation(
                    "claim_owner",
                    w.run,
                    None,
                    f"{w.label} works on the lease claimed for it at generation {generation} "
                    f"under {owner}, not its own token {w.pilot.owner}",
                )
            )

    def _run_generation(self, run: str) -> int | None:
        known = self.known.get(run)
        return None if known is None else known[1]

    def _wait(self, w: WorkerRec, *, frozen: bool) -> None:
        """``w`` stops being active: frozen at its gate (a stall), or outpaced but alive."""
        if self.active.get(w.run) is w:
            self.active[w.run] = None
        w.frozen = frozen
        self.waiting.setdefault(w.run, []).append(w)
        if frozen:
            w.pilot.freeze()
        else:
            self.stats.zombies += 1

    def _live(self, run: str | None = None) -> list[WorkerRec]:
        """Live workers that are not frozen (they beat), in the order they were started."""
        return [w for w in self.workers if w.alive and not w.frozen and run in (None, w.run)]

    def _generation(self, w: WorkerRec) -> int | None:
        if w.generation is None:
            row = sqlfile.one(
                self.conn, "generation_of_owner", {"run": w.run, "owner": w.pilot.owner}
            )
            w.generation = row["generation"] if row else None
        return w.generation

    def _owns(self, w: WorkerRec) -> bool:
        row = sqlfile.one(self.conn, "lease_of", {"run": w.run})
        return bool(
            row
            and row["status"] == "running"
            and row["owner"] == w.pilot.owner
            and row["generation"] == self._generation(w)
        )

    # -- one drive ----------------------------------------------------------------------------

    def _drive(self, w: WorkerRec, decide: Decide, *, first: str = "go") -> str:
        """Let ``w`` go from where it waits; ``decide`` what happens at each next gate."""
        resume = w.state == "paused"
        if resume:
            w.pilot.thaw()
            w.frozen = False
            if first in ("crash", "kill"):
                assert w.gate is not None
                return self._kill(w, w.gate, first)
        w.state = "running"
        self.moved.add(w.label)

        def on_gate(gate: Gate) -> Literal["go", "pause", "crash", "kill"]:
            self._attribute(w)
            self._at_gate(w, gate)
            return decide(gate)

        stop = w.pilot.drive(on_gate, MAX_GATES, resume=resume)
        message = stop.message
        if isinstance(message, Exit):
            self._attribute(w)
            return self._ended(w, message)
        if stop.error is not None:
            raise stop.error
        if stop.action == "pause":
            w.state = "paused"
            w.gate = message
            return f"{w.label} at {message.point} seq={message.seq}"
        if stop.action in ("crash", "kill"):
            return self._kill(w, message, stop.action)
        w.pilot.reply("go")  # the last of MAX_GATES gates passed, and the worker goes on
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

    # -- the heartbeat ------------------------------------------------------------------------

    def _beat(self, w: WorkerRec) -> str:
        """``w`` renews its lease once through the runtime's heartbeat; judge what it did."""
        try:
            result = w.pilot.beat()
        except AssertionError:
            raise
        except Exception as exc:  # a failed beat costs that beat, never the heartbeat
            self.problems.append(
                Violation(
                    "renewal",
                    w.run,
                    None,
                    f"{w.label}'s heartbeat raised {type(exc).__name__}: {exc}"[:300]
                    + ": a beat that fails costs that beat only (production's thread dies)",
                )
            )
            return f"{w.label} beat raised {type(exc).__name__}"
        self.moved.add(w.label)
        if not result.present:
            return f"{w.label} holds no lease"
        if result.expires is not None:
            owner, generation = self.known.get(w.run, (None, 0))
            if (owner, generation) != (w.pilot.owner, self._generation(w)):
                held = "nobody" if owner is None else f"{owner} (generation {generation})"
                self.problems.append(
                    Violation(
                        "foreign_renewal",
                        w.run,
                        None,
                        f"{w.label} (generation {w.generation}) renewed the lease of a run held "
                        f"by {held}: a renewal by anyone but the owner keeps a lease alive "
                        "that nobody may be renewing",
                    )
                )
            else:
                w.lease_until = result.expires
            return f"{w.label} renewed"
        if result.lost:
            if w.fenced_after is None:
                w.fenced_after = {}
                logged = [(a.remote, a.seq) for a in self.remotes.answers()]
                logged += [(r.remote, r.seq) for r in desk_reads(self.remotes.desk_log())]
                for remote, seq in logged:
                    w.fenced_after[remote] = max(w.fenced_after.get(remote, 0), seq)
            return f"{w.label} fenced"
        if not w.dropped:  # only a database that went away excuses a failed beat
            self.problems.append(
                Violation(
                    "renewal",
                    w.run,
                    None,
                    f"{w.label}'s heartbeat beat and renewed nothing, yet it was not fenced and "
                    "its database never went away: a live owner's beat renews its lease",
                )
            )
        return f"{w.label} renewal failed"

    def _beat_all(self, run: str | None = None) -> str:
        results = [self._beat(w) for w in self._live(run) if w.state == "paused"]
        return ", ".join(results) if results else NOBODY_BEATS

    # -- the ask ledger -----------------------------------------------------------------------

    def _attribute(self, w: WorkerRec) -> None:
        count = self.remotes.model_calls(w.run)
        seen = self.model_seen.get(w.run, 0)
        if count > seen:
            run_generation = self._run_generation(w.run)
            for number in range(seen + 1, count + 1):
                if w.ask is not None:
                    w.ask.lose("asked again before journaling the previous answer", False)
                ask = Ask(
                    run=w.run,
                    seq=w.deciding,
                    number=number,
                    worker=w.label,
                    generation=self._generation(w),
                    run_generation=run_generation,
                )
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
            w.ask.lose(f"went on to {gate.point} without journaling it", False)
            w.ask = None

    # -- endings (properties.endings) --------------------------------------------------------

    @abstractmethod
    def _ended(self, w: WorkerRec, message: Exit) -> str:
        """Record how ``w`` ended and judge it against what the schedule explains."""

    def _mark_dropped(self, w: WorkerRec) -> None:
        w.dropped = True
        if isinstance(w.pilot, ThreadPilot):
            w.pilot.dropped = True
