"""The pool runner's checks of the supervisor's own states (:class:`WatchChecks`, mixed into
:class:`properties.pool_runner.PoolRunner`), at every pass of every pool schedule:

- ``pool_room``: after a pass, a supervisor has at most ``max_workers`` pool workers (a
  spare or a replacement starts only while there is room; a claim starts a worker only
  when none is idle, and claims no more runs than ``max_workers`` less its busy
  workers); and while it has room, an opened worker and no spare that died before it was
  ready, one of its workers is idle: the spare the design keeps
  (``Supervisor._keep_spare``);
- a worker its watchdog killed while the runner let it beat (not stalled) is explained
  only if its run made no progress, by the suite's own measure taken before the pass
  (:data:`pool_idle_for`), for more than ``stuck_after``: the "stuck" watchdog. Its run
  may then be claimed in the same pass although its lease was live a moment before.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from agent_runtime.store import db
from agent_runtime.supervisor.workerpool import WorkerProcess

from . import sqlfile
from .pool_pilot import PoolPilot
from .pool_world import PoolWorld, Supervised
from .violations import Violation

Tenure = tuple[int, str, int]  # pid, run, generation


def pid_of(owner: object) -> str:
    """The process id in an owner token (host:pid:nonce); "" for anything else."""
    parts = str(owner).split(":")
    return parts[1] if len(parts) >= 3 else ""


@dataclass
class BeforePass:
    """What the runner knew of a supervisor's workers before one of its passes."""

    procs: list[WorkerProcess]
    held: dict[int, Tenure] = field(default_factory=dict)  # busy pid -> its tenure
    idle_for: dict[str, float] = field(default_factory=dict)  # run -> seconds w/o progress


class WatchChecks:
    """The checks; the runner holds what they read."""

    problems: list[Violation]
    world: PoolWorld
    conn: db.Connection
    trace: list[str]
    # (pid, run, generation) of a worker the watchdog killed -> its run's idleness then
    killed_idle: dict[Tenure, float]
    # (event index, supervisor, pool workers, idle ones) after each pass: what stories read
    pool_sizes: list[tuple[int, str, int, int]]

    def _clear_watch(self) -> None:
        self.killed_idle = {}
        self.pool_sizes = []

    def _before_pass(self, s: Supervised) -> BeforePass:
        before = BeforePass(procs=list(s.supervisor.workers.values()))
        for p in before.procs:
            if p.lease is not None:
                before.held[p.pid] = (p.pid, p.lease.run_id, p.lease.generation)
        runs = sorted({run for _, run, _ in before.held.values()})
        if runs:
            rows = sqlfile.rows(self.conn, "pool_idle_for", {"runs": runs})
            before.idle_for = {row["id"]: float(row["idle_for"]) for row in rows}
        return before

    def _after_pass(self, s: Supervised, before: BeforePass) -> set[str]:
        """Record the pass's kills and the pool's size, check ``pool_room``; the pids (as
        in an owner token) of the workers its watchdog killed in the pass."""
        killed: set[str] = set()
        for p in before.procs:
            tenure = before.held.get(p.pid)
            if p.killed_for is not None and tenure is not None and tenure not in self.killed_idle:
                self.killed_idle[tenure] = before.idle_for.get(tenure[1], 0.0)
                killed.add(str(p.pid))
        self._check_pool_room(s)
        return killed

    def _check_pool_room(self, s: Supervised) -> None:
        sup = s.supervisor
        if sup.stopping or sup.spawn != "pool":
            return
        workers = list(sup.workers.values())
        cap = self.world.settings.max_workers
        live = [w for w in workers if not w.hung_up]
        idle = sum(1 for w in workers if w.idle)
        self.pool_sizes.append((len(self.trace), s.name, len(live), idle))
        busy = len(sup.busy)
        if len(live) > cap:
            self.problems.append(
                Violation(
                    "pool_room",
                    None,
                    None,
                    f"the {s.name} supervisor has {len(live)} pool workers after a pass "
                    f"({busy} busy, {idle} idle) with max_workers {cap}: a spare or a "
                    "replacement starts only while there is room",
                )
            )
        opened = any(w.ready for w in workers)
        if len(workers) < cap and opened and not sup._spare_failed and not idle:
            self.problems.append(
                Violation(
                    "pool_room",
                    None,
                    None,
                    f"the {s.name} supervisor has {len(workers)} pool workers ({busy} busy, "
                    f"none idle) with max_workers {cap} and an opened one: while there is "
                    "room it keeps a spare",
                )
            )

    def _killed_as_stuck(self, tenure: PoolPilot) -> bool:
        """Whether the watchdog killed ``tenure``'s worker, alive and beating, when its
        run had made no progress for more than ``stuck_after`` (the suite's measure)."""
        key = (tenure.pid, tenure.lease.run_id, tenure.lease.generation)
        stuck_after = self.world.settings.stuck_after
        return key in self.killed_idle and stuck_after > 0 and self.killed_idle[key] > stuck_after
