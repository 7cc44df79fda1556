"""Run one schedule against a real PostgreSQL, in-process or with real processes.

The runner owns the workers of a schedule and applies its events one by one
(:mod:`properties.events`); :class:`~properties.driving.Driving` moves the workers. Time
is the database's ``cr_now()``, frozen at the start of every example (``clock.freeze``):
it moves only when a ``tick`` or a ``sweep`` moves it, so a lease expires exactly when the
schedule says, in both runners, however fast the machine is.

Heartbeats are real: a ``tick``, a ``sweep`` or a ``heartbeat`` event makes every live
worker that is not frozen renew through the runtime's own :class:`~agent_runtime.loop.lease.
Heartbeat` (while it waits at a gate, as its thread would). Frozen workers do not renew,
so their runs are taken over once the lease runs out; a zombie's renewal fails and marks it
fenced. A ``db_crash`` stops the suite's own PostgreSQL hard and starts it again: every
connection drops, and what was committed without being flushed is gone.

Every run is of one kind (:mod:`properties.agents`: the seed's provisioning agent, its
parallel-calls twin, the support agent, the support agent with a ``once`` email), and
finishes like its kind's crash-free baseline. A run parked for an operator (a ``once``
call in doubt) is resolved by a ``resolve`` event, or at teardown, the way a careful
operator would: confirmed with what the desk delivered, or redone if it delivered nothing.

After every event :meth:`~properties.checks.Checks.check` takes one snapshot and runs
every invariant.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterable
from datetime import timedelta
from typing import Any, Final, Literal

from agent_runtime.config import Settings
from agent_runtime.errors import DatabaseError
from agent_runtime.store import clock, db

from . import baseline, sqlfile, variants
from .agents import DEFAULT_KIND, KINDS
from .baseline import Baseline
from .disruptions import CrashableServer
from .driving import NOBODY_BEATS, Stats
from .events import Event, run_id, setting_value
from .observe import Snapshot
from .pilots import Start, owner_of
from .race import RacingClaims
from .remotes import Remotes
from .settling import EPOCH, Settling
from .shadow import Shadow
from .supervisor_events import NoSupervisor

log = logging.getLogger(__name__)

LEASE: Final = 12.0  # seconds; a sweep moves the clock this much and one second more
VACUUM_EVERY: Final = 20  # examples between two vacuums of the emptied tables
# events that only arm a remote's knobs: no worker runs, nothing observable changes
KNOB_EVENTS: Final = frozenset({"cloud_fault", "model_fault"})

# The same settings in both runners; tool_timeout only costs real time in the process
# runner (a dropped answer is waited for). Retries back off (the desk's tools and the cloud's
# client alike), but nobody really sleeps: a worker's wait is a gate (properties.waits).
SETTINGS: Final = Settings(
    lease=LEASE,
    heartbeat=3.0,
    tool_timeout=1.0,
    tool_retries=2,
    retry_backoff=0.5,  # 0.5, 1, 2, 4 s before the retries: properties.waits checks them
    model_timeout=10.0,
    run_backoff=1.0,  # a run released on a resumable error waits 1, 2, 4, 8, 8... seconds
    run_backoff_cap=8.0,
    max_attempts=1_000_000,  # the sweep never gives up on a run: teardown must finish it
    max_bad_answers=1_000_000,  # nor does a worker, however many calls the faults spoil
)
OUTAGE: Final = SETTINGS.tool_retries + 1  # failed requests that fail a whole call


class ScheduleRunner(NoSupervisor, RacingClaims, Settling):
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
            cloud_url=remotes.cloud_url,
            model_url=f"{remotes.model_url}/v1",  # Chat Completions' base; /v1/decide's too
            database_url=url,
        )
        self.base_settings = self.settings  # what a configure event changes, per example
        self.conn = db.connect(url, application_name="properties.runner")
        db.ensure_schema(self.conn)
        self._install_race_gate()  # the race event's, in the suite's database (properties.race)
        self.stats = Stats()
        self.on_event: Callable[[str], None] = lambda label: None  # hypothesis.event in tests
        self.supervisor = owner_of("supervisor")
        self.clock_now = EPOCH
        self._baselines: dict[str, Baseline] = {}
        self._clear()

    # -- lifecycle -----------------------------------------------------------------------------

    def _clear(self) -> None:
        self.settings = self.base_settings
        self._clear_workers()
        self.shadow = Shadow()
        self.gen_before: dict[str, int] = {}
        self.last: Snapshot | None = None  # the snapshot of the last check, if still current
        self.unchanged: Snapshot | None = None  # ... and the next check's, if nothing moved
        self.trace: list[str] = []
        self.claims_seen: set[tuple[str, int]] = set()
        self.previous: Snapshot | None = None  # the snapshot the last check compared with
        self.kinds: dict[str, str] = {}  # each started run's kind
        self.resolved: set[str] = set()
        self.redone: dict[tuple[str, int], int] = {}  # an operator's redos, by call
        self.held_at = {}
        self.holding = False
        self.landed = set()
        self.spoken = {}
        self.orphaned = set()

    def reset(self) -> None:
        """A clean slate for the next schedule: no workers, an empty journal, fresh mocks."""
        self.cleanup()
        self.last = None
        try:
            db.run(self.conn, "delete_all_runs")
        except DatabaseError:  # another runner (or a replay command) crashed the server
            self._reconnect()
            db.run(self.conn, "delete_all_runs")
        if self.stats.examples % VACUUM_EVERY == 0:
            sqlfile.rows(self.conn, "vacuum_journal")
        if self.server is not None:
            self.server.between_examples()
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

    def baseline(self, kind: str = DEFAULT_KIND) -> Baseline:
        """The crash-free run of ``kind``, computed once: start r0, let it finish."""
        if kind not in self._baselines:
            self.reset()
            self.apply(Event(op="start", run=0, agent=kind))
            self.settle()
            self._baselines[kind] = baseline.baseline_of(self.observe(), run_id(0))
            self.reset()
        return self._baselines[kind]

    def warm(self) -> None:
        """Every kind's baseline, before the first schedule."""
        for kind in KINDS:
            self.baseline(kind)

    def baselines(self) -> dict[str, Baseline]:
        """Each started run's baseline; ``warm()`` must have run (computing one resets)."""
        missing = {self.kinds[run] for run in self.started} - self._baselines.keys()
        if missing:
            raise RuntimeError(f"baselines of {sorted(missing)} not computed: call warm() first")
        return {run: self._baselines[self.kinds[run]] for run in self.started}

    def _start(self, run: str, **how: Any) -> Start:
        self.spoken.setdefault(run, set()).add(self.settings.model_protocol)
        return Start(run_id=run, label=self._label(), kind=self.kinds[run], **how)

    def replay(self, events: Iterable[Event]) -> dict[str, Any]:
        """Reset, apply and check every event, settle, check the end; the outcome."""
        self.warm()
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
        current, self.last, self.unchanged = self.last, None, None
        handler = getattr(self, f"_on_{event.op}")
        result: str = handler(event)
        self._stamp_held()
        if current is not None and (
            event.op in KNOB_EVENTS or result.startswith("skipped") or result == NOBODY_BEATS
        ):
            # Nothing moved (a skipped event returns before it acts; a knob is not observed; a
            # tick nobody renewed at moved only the clock, which no snapshot holds): the next
            # check judges the same snapshot again instead of reading it again.
            self.unchanged = self.last = current
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
        self.kinds[run] = e.kind
        self.active[run] = None
        self.waiting[run] = []
        return self._launch(self._start(run))

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
        match = self._at(e)
        first = how if w.gate is not None and match(w.gate) else "go"
        result = self._drive(w, lambda g: how if match(g) else "go", first=first)
        return result if w.crashed_by_us else f"{result} (never reached {e.point})"

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

    def _on_thaw(self, e: Event) -> str:
        """The run's oldest stalled worker comes back to life where it stands: its heartbeat
        beats again (a hung process woken: its heartbeat may beat before its work goes on)."""
        frozen = [w for w in self.waiting.get(e.run_name, []) if w.frozen and w.alive]
        if not frozen:
            return "skipped (no stalled worker)"
        w = frozen[0]
        w.pilot.thaw()
        w.frozen = False
        assert w.gate is not None
        return f"{w.label} thawed at {w.gate.point} seq={w.gate.seq}: it beats again"

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
        return self._launch(self._start(run, takeover=True))

    def _on_configure(self, e: Event) -> str:
        """Workers started from now on run with the new setting (a deployment's)."""
        assert e.setting is not None and e.n is not None
        value = setting_value(e.setting, e.n)
        self.settings = self.settings.with_changes(**{e.setting: value})
        self.stats.count(f"configure {e.setting}")
        return f"workers from now on: {e.setting}={value}"

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
        for lease, task in claimed:
            old = self.active.get(lease.run_id)
            if old is not None:  # its lease ran out (the claim was checked): outpaced
                self._wait(old, frozen=False)
            self.stats.restarts += 1
            start = self._start(lease.run_id, lease=lease, task=task)
            results.append(f"{lease.run_id}: " + self._launch(start))
        return f"{beats}; claimed " + ("; ".join(results) if results else "nothing")

    def _advance(self, seconds: float) -> None:
        db.run(self.conn, "clock_advance", {"seconds": seconds})  # clock.advance, unread
        self.clock_now += timedelta(seconds=seconds)
        self._expire_held()

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

    def _statuses(self) -> dict[str, str]:
        return {row["id"]: row["status"] for row in sqlfile.rows(self.conn, "statuses")}

    def _status(self, run: str) -> str | None:
        row = sqlfile.one(self.conn, "status_of", {"run": run})
        return row["status"] if row else None
