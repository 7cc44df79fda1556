"""The events that disrupt a schedule from outside its workers, and the operator's hand.

:class:`Disruptions` is the part of the schedule runner that arms the remotes' fault knobs
(``cloud_fault`` arms the cloud's and the support desk's alike), the model's bad answers,
cuts a worker's database connection, crashes PostgreSQL itself, and resolves a parked run
the way a careful operator would (``resolve``).
"""

from __future__ import annotations

import time
from abc import abstractmethod
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Final, Protocol

from agent_runtime.config import Settings
from agent_runtime.errors import RunUnavailable
from agent_runtime.operator.actions import resolve_call
from agent_runtime.operator.attention import CallResolution, Choice
from agent_runtime.operator.snapshot import read_history

from . import sqlfile
from .checks import Checks
from .driving import WorkerRec
from .events import TUNABLE, Event
from .pilots import Gate
from .violations import Violation

DROP_WAIT: Final = 5.0  # seconds a terminated backend may take to disappear


class CrashableServer(Protocol):
    """A PostgreSQL the runner may crash (``properties.server.SuiteDatabase``)."""

    def crash(self, while_down: Callable[[], object] | None = None) -> None:
        """Stop the server hard (no flush, no checkpoint) and start it again (``while_down``
        called in between)."""

    def between_examples(self) -> None:
        """Before an example: nothing but the schedule may write the WAL out from here on."""


class Disruptions(Checks):
    """Faults, connection drops, database crashes and the operator, as schedule events."""

    server: CrashableServer | None
    settings: Settings
    # Held requests (cloud_fault hold_next) by (remote, its number): the clock when each was
    # first seen held. A remote keeps the in-flight promise: one that has not landed when
    # the clock passes that moment plus the bound (Settings.in_flight) never acts.
    held_at: dict[tuple[str, int], datetime]
    holding: bool  # hold_next was armed in this example: look for held requests

    @abstractmethod
    def _reconnect(self) -> None:
        """A new connection of the runner's own after its old one died."""

    @staticmethod
    def _at(e: Event) -> Callable[[Gate], bool]:
        return lambda g: g.point == e.point and (e.seq is None or g.seq == e.seq)

    def _to_gate(self, w: WorkerRec, e: Event) -> str | None:
        """Drive ``w`` to the event's gate and pause it there; None if it is there already."""
        match = self._at(e)
        if w.gate is not None and match(w.gate):
            return None
        result = self._drive(w, lambda g: "pause" if match(g) else "go")
        return None if w.alive else f"{result} (never reached {e.point})"

    def _on_cloud_fault(self, e: Event) -> str:
        knobs = self.remotes.cloud_faults()
        assert e.fault is not None
        # Each request the knob spoils is one failed attempt; a worker stops on an outage
        # (RemoteUnavailable) only once a call's every attempt failed: see _expected.
        if e.fault == "latency":
            seconds = e.seconds or 0.0
            self.remotes.set_cloud_faults(latency=seconds)
            if seconds >= self.settings.tool_timeout:  # every attempt times out, of every
                # worker's call while it lasts: a worker configured later may make more
                most = max(self.settings.tool_retries, TUNABLE["tool_retries"])
                self.failures_armed += most + 1
        elif e.fault == "fail_lookups":
            desk = self.remotes.desk_faults()
            self.failures_armed += e.n or 1
            self.remotes.set_desk_faults(fail_lookups=int(desk[e.fault]) + (e.n or 1))
        else:
            self.failures_armed += e.n or 1
            self.holding = self.holding or e.fault == "hold_next"
            self.remotes.set_cloud_faults(**{e.fault: int(knobs[e.fault]) + (e.n or 1)})
        self._count_fault(f"cloud {e.fault}")
        return "armed"

    def _on_land(self, e: Event) -> str:
        self._stamp_held()
        if not self.held_at:
            return "skipped (nothing held)"
        remote, request = min(self.held_at, key=lambda k: (self.held_at[k], k))
        del self.held_at[remote, request]
        logged = {(a.remote, a.seq) for a in self.remotes.answers()}
        landed = self.remotes.land(remote, request)
        self.landed |= {(a.remote, a.seq) for a in self.remotes.answers()} - logged
        self._count_fault("request landed")
        return ", ".join(f"{remote} {r['op']} {r['ref']} landed: {r['answer']}" for r in landed)

    def _stamp_held(self) -> None:
        """Note the clock at which each newly held request was received."""
        if self.holding:
            for remote in ("cloud", "desk"):
                for r in self.remotes.held(remote):
                    self.held_at.setdefault((remote, r["id"]), self.clock_now)

    def _expire_held(self) -> None:
        """The clock moved: every held request past its in-flight bound never acts now."""
        bound = timedelta(seconds=self.settings.in_flight)
        for (remote, request), at in list(self.held_at.items()):
            if at + bound <= self.clock_now:
                self.remotes.forget(remote, request)
                del self.held_at[remote, request]

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
        gates = [
            (live.run, live.gate.point, live.gate.seq)
            for live in self.workers
            if live.alive and live.state == "paused" and live.gate is not None
        ]
        self.conn.close()
        self.server.crash()
        self._reconnect()
        for live in self.workers:
            if live.alive:
                self._mark_dropped(live)
        self.shadow.database_crashed(gates)
        self.stats.db_crashes += 1
        self.on_event("database crash")
        return f"the database crashed and came back{where}"

    def _on_resolve(self, e: Event) -> str:
        run = e.run_name
        if self._status(run) != "needs_attention":
            return "skipped (the run does not need attention)"
        if any(w.alive for w in self.workers if w.run == run):
            return "skipped (a worker of the run is alive: an operator waits for it to die)"
        return self._resolve(run)

    def _resolve(self, run: str) -> str:
        """What a careful operator does with the call in doubt: ask the desk whether the
        email went out; confirm it with the delivery if it did, redo it if not."""
        doubt = sorted(c["seq"] for c in sqlfile.rows(self.conn, "calls_in_doubt", {"run": run}))
        if not doubt:
            return "nothing in doubt"
        seq = doubt[0]
        key = f"{run}:{seq}"
        sent = [row for row in self.remotes.desk_rows() if row.key == key]
        if sent:
            delivered = {**sent[0].result, "status": "delivered"}
            self._resolved(run, seq, "confirm", result=delivered, reason="delivered")
            how = f"confirmed {key} with {sent[0].id}"
        else:
            try:
                self._resolved(run, seq, "redo", reason="the desk delivered nothing")
            except RunUnavailable as exc:  # its send may still land: an operator waits
                if "may still land" not in str(exc):
                    raise
                return f"skipped ({key} may still land)"
            how = f"redo of {key}"
            self.redone[run, seq] = self.redone.get((run, seq), 0) + 1
        self.resolved.add(run)
        self.stats.count("operator " + how.split()[0])
        return f"an operator resolved the run: {how}"

    def _resolved(
        self, run: str, seq: int, choice: Choice, *, reason: str, result: object = None
    ) -> CallResolution:
        """``resolve_call``, its report held to what it did (**resolution**): the call's new
        state and the run's status as the statement left them (a parked run pending, a
        failed one failed), its audit row (``call_resolutions``, what ``show`` lists) with
        the choice and the call's new result (none for a redo), and a confirmed time on a
        settled call only. An operator acts on that report and audits by that row."""
        was = sqlfile.one(self.conn, "resolved_call", {"run": run, "seq": seq})
        done = resolve_call(self.conn, run, seq, choice, result=result, reason=reason)
        now = sqlfile.one(self.conn, "resolved_call", {"run": run, "seq": seq})
        shown = [(r.seq, r.choice, r.result) for r in read_history(self.conn, run).resolutions]
        assert was is not None and now is not None  # the statement resolved this very call
        wrong = []
        if (done.state, done.status) != (now["state"], now["status"]) or now["status"] != (
            "failed" if was["status"] == "failed" else "pending"
        ):
            wrong.append(
                f"it said {done.state}, run {done.status}; the journal has {now['state']}, "
                f"run {now['status']} (it was {was['status']})"
            )
        if done.past.result != now["result"] or (choice == "redo") != (now["result"] is None):
            wrong.append(
                f"its audit says result {done.past.result!r:.100}, the call {now['result']!r:.100}"
            )
        if (choice == "redo") != (now["confirmed_at"] is None):
            wrong.append(f"the call's confirmed time is {now['confirmed_at']}")
        if not shown or shown[-1] != (seq, choice, now["result"]):
            wrong.append(f"show lists the resolutions {shown!r:.200}")
        for text in wrong:
            said = f"an operator's --{choice} of {run}:{seq}: {text}"
            self.problems.append(Violation("resolution", run, seq, said))
        return done

    def _count_fault(self, label: str) -> None:
        self.stats.count(label)
        self.on_event(f"fault: {label}")
