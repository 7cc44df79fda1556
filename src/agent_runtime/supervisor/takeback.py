"""Taking a run back from a worker of the supervisor's own that no longer works on it.

A worker stops working on its run in one of two ways. It exits: :func:`free_after_exit`
frees what it held, at once after a first death, with a backoff after deaths in a row.
Or it stays alive but useless, and :class:`Watchdog` finds it for the supervisor to kill
(``SIGKILL``) and then free like any death, its run claimed again in the same sweep:

- *hung*: it holds a run whose lease has run out on the database clock (``cr_now()``):
  it stopped beating (``SIGSTOP``, swapped out, a deadlock that holds the heartbeat
  thread too). Any claim may take that run now; it must not keep a slot too.
- *stuck*: its lease is live (the heartbeat thread beats) but the run has made no
  progress for ``stuck_after`` seconds (a tool that never returns). Progress is a
  journal write of the run: its claim (or any later write of the run row), a model
  answer, a call's intent or confirm; a heartbeat's renewal is not.
- *lost*: the run is no longer held at the generation the worker was handed (taken by
  a claim elsewhere, cancelled, or ended by the worker a moment before it says so). It
  gets one lease to say it is done, then is killed as hung.

A check is one statement (``held_runs``) reading the busy workers' runs by primary key
and the database clock; the supervisor makes it at most twice a poll.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from agent_runtime.backoff import Backoff
from agent_runtime.errors import EXIT_CRASHED
from agent_runtime.store import db
from agent_runtime.store.journal import Journal
from agent_runtime.store.records import Lease
from agent_runtime.supervisor.workerpool import WorkerProcess

log = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True)
class Verdict:
    """A busy worker to kill, and what its log line and its run's failure say."""

    proc: WorkerProcess
    run_id: str
    event: str  # the log line's event: worker-hung or worker-stuck
    measure: str  # the log line's measurements, key=value
    reason: str  # recorded on the run as why it stopped


class Watchdog:
    """Finds the busy workers that hung, are stuck, or hold a run lost to them."""

    def __init__(self, *, lease: float, stuck_after: float) -> None:
        """``lease``: how long a lost run's worker may take to say it is done;
        ``stuck_after``: seconds without progress (0: never stuck)."""
        self.lease = lease
        self.stuck_after = stuck_after
        # (pid, run, generation) -> database time the run was first seen lost to that worker
        self._lost: dict[tuple[int, str, int], datetime] = {}

    def check(self, conn: db.Connection, busy: Iterable[WorkerProcess]) -> list[Verdict]:
        """The workers among ``busy`` to kill now."""
        holding = [(p, p.lease) for p in busy if p.lease is not None]
        if not holding:
            self._lost.clear()
            return []
        runs = sorted({lease.run_id for _, lease in holding})
        rows = {row["id"]: row for row in db.run(conn, "held_runs", {"runs": runs})}
        verdicts = [v for p, lease in holding if (v := self._judge(p, lease, rows[lease.run_id]))]
        keep = {(p.pid, lease.run_id, lease.generation) for p, lease in holding}
        self._lost = {k: v for k, v in self._lost.items() if k in keep}
        return verdicts

    def _judge(self, proc: WorkerProcess, lease: Lease, row: dict[str, Any]) -> Verdict | None:
        if row["held_at"] != lease.generation:
            key = (proc.pid, lease.run_id, lease.generation)
            if key not in self._lost and row["held_at"] is not None:
                # Taken by a claim elsewhere (not ended or cancelled, the everyday case):
                # its one lease to report starts now.
                log.info(
                    "worker-lost run=%s pid=%d generation=%d",
                    lease.run_id,
                    proc.pid,
                    lease.generation,
                )
            lost_ago = (row["now"] - self._lost.setdefault(key, row["now"])).total_seconds()
            if lost_ago <= self.lease:
                return None
            return Verdict(
                proc=proc,
                run_id=lease.run_id,
                event="worker-hung",
                measure=f"run_lost_ago={lost_ago:.1f}s",
                reason=f"the worker was silent {lost_ago:.0f} s after its run was no longer "
                "its own; the supervisor killed it",
            )
        expired_ago = float(row["expired_ago"])
        if expired_ago >= 0:
            return Verdict(
                proc=proc,
                run_id=lease.run_id,
                event="worker-hung",
                measure=f"lease_expired_ago={expired_ago:.1f}s",
                reason=f"the worker hung: its lease ran out {expired_ago:.0f} s before the "
                "supervisor killed it",
            )
        idle_for = float(row["idle_for"])
        if self.stuck_after > 0 and idle_for > self.stuck_after:
            return Verdict(
                proc=proc,
                run_id=lease.run_id,
                event="worker-stuck",
                measure=f"no_progress_for={idle_for:.1f}s stuck_after={self.stuck_after:g}s",
                reason=f"the worker was stuck: no progress for {idle_for:.0f} s (stuck_after "
                f"{self.stuck_after:g} s); the supervisor killed it",
            )
        return None


def free_after_exit(
    journal: Journal,
    backoff: Backoff,
    lease: Lease,
    code: int,
    *,
    stopping: bool,
    reason: str | None = None,
) -> None:
    """Free the run of a worker that died holding it, and log when it may go again.

    Our own child is dead for certain: its lease need not run out first. After a first
    death since the last progress the run goes again at once (a one-off: a deploy, an
    OOM kill, a hang; or our own SIGTERM when ``stopping``); deaths in a row back off
    like resumable errors, so a run that kills its worker every time does not spin. A
    worker that stopped cleanly released the run with its own reason and backoff already.
    ``reason``: why the supervisor killed it, if it did.
    """
    run = journal.get_run(lease.run_id)
    if run is None:
        return
    if run.status == "running" and run.owner is not None and run.generation == lease.generation:
        died = code == EXIT_CRASHED or code < 0
        if died:  # a worker we stopped ourselves (SIGTERM) did nothing wrong either
            again = run.attempts > 1 and not stopping
            delay = backoff.delay(run.attempts - 1) if again else 0.0
        else:
            delay = backoff.delay(run.attempts)
        if reason is None and not died:
            reason = f"the worker exited with code {code} (see its log)"
        params = {"run": lease.run_id, "generation": lease.generation, "delay": delay}
        db.run(journal.conn, "expire_lease_of", {**params, "reason": reason})
        run = journal.get_run(lease.run_id)
    if run is not None and run.backing_off and run.lease_expires_at is not None:
        log.info(
            "backoff run=%s attempt=%d until=%s",
            run.id,
            max(run.attempts, 1),  # 0: this claim made progress, then stopped: the first
            run.lease_expires_at.isoformat(timespec="milliseconds"),
        )
