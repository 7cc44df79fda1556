"""The pool runner's own invariants (:class:`PoolChecks`, mixed into
:class:`properties.pool_runner.PoolRunner`): a sweep claims only expired leases, a dead
worker's run is free at once (deaths in a row back off), no claimable run waits while a
supervisor has room, no pool worker holds two runs."""

from __future__ import annotations

from typing import Any

from agent_runtime.store import db
from agent_runtime.store.records import Lease

from . import sqlfile
from .pool_pilot import PoolPilot
from .pool_world import PoolWorld, Supervised
from .violations import Violation


class PoolChecks:
    """The checks; the runner holds what they read."""

    problems: list[Violation]
    world: PoolWorld
    conn: db.Connection

    def _check_live_claim(self, lease: Lease, prior: dict[str, object] | None) -> None:
        if prior is None or prior["owner"] is None:
            return
        expires, now = prior["lease_expires_at"], prior["now"]
        if expires is not None and expires > now:  # type: ignore[operator]
            self.problems.append(
                Violation(
                    "live_claim",
                    lease.run_id,
                    None,
                    f"the supervisor claimed the run from {prior['owner']} (generation "
                    f"{prior['generation']}) whose lease was live until {expires} (now {now}): "
                    "a sweep may only claim expired leases",
                )
            )

    def _check_freed(self) -> None:
        """The run of a worker that died holding it is free, or claimed again."""
        died, self.world.died = self.world.died, []
        for tenure in died:
            row = sqlfile.one(self.conn, "lease_of", {"run": tenure.lease.run_id})
            if row is None or row["status"] != "running":
                continue
            if row["owner"] is None:
                self._check_backoff(tenure, row)
                continue
            if row["generation"] == tenure.lease.generation:
                self._freed_wrong(
                    tenure,
                    f" and its supervisor left the lease with {row['owner']} until "
                    f"{row['lease_expires_at']}: a dead worker's run is freed at once",
                )

    def _check_backoff(self, tenure: PoolPilot, row: dict[str, Any]) -> None:
        """A first death since the run's last progress frees it for a claim at once; deaths
        in a row back off, by the run's backoff rule (``takeback.free_after_exit``)."""
        first = row["attempts"] <= 1 and row["generation"] == tenure.lease.generation
        expires = row["lease_expires_at"]
        if not first and expires is not None and row["generation"] == tenure.lease.generation:
            # the n-th death in a row waits the backoff's n-1-th wait exactly (no jitter in
            # the pool mode, and the pass that freed it is the one this check follows), or
            # nothing when its supervisor stopped it: a wait counted from the wrong death
            # (attempts + 1, / 1, // 1, % 1) held runs back 2-4 times too long, or too short,
            # and none at the second death (attempts > 2) passed as a stop's
            most = self.world.settings.run_backoff_rule().ceiling(row["attempts"] - 1)
            want = 0.0 if tenure.supervised.supervisor.stopping else most
            held = (expires - row["now"]).total_seconds()
            if abs(held - want) > 1e-6:
                self._freed_wrong(
                    tenure,
                    f", death {row['attempts']} in a row, and its supervisor held the run back "
                    f"{held:.1f}s, not {want:.1f}s (the backoff's wait {row['attempts'] - 1}, "
                    "none when it stopped the worker)",
                )
        if first and expires is not None and expires > row["now"]:
            self._freed_wrong(
                tenure,
                f", its run's first death since progress, and its supervisor held the run back "
                f"until {expires} (now {row['now']}): only deaths in a row back off",
            )

    def _freed_wrong(self, tenure: PoolPilot, how: str) -> None:
        said = f"pool worker {tenure.pid} died holding generation {tenure.lease.generation}{how}"
        self.problems.append(Violation("pool_freed", tenure.lease.run_id, None, said))

    def _check_idle_wait(self, s: Supervised) -> None:
        """No run is left claimable by a pass that had room for a worker."""
        supervisor = s.supervisor
        room = self.world.settings.max_workers - len(supervisor.busy)
        if supervisor.stopping or room <= 0:
            return
        idle = sum(1 for w in supervisor.workers.values() if w.idle)
        for row in sqlfile.rows(self.conn, "pool_claimable"):
            self.problems.append(
                Violation(
                    "pool_idle_wait",
                    row["id"],
                    None,
                    f"claimable (lease until {row['lease_expires_at']}, now {row['now']}) after "
                    f"a pass of the {s.name} supervisor with room for {room} more workers "
                    f"({idle} idle): a claimable run must not wait for a free worker",
                )
            )

    def _check_one_run(self) -> None:
        """No pool worker holds two live leases."""
        pids = {str(pid) for s in self.world.supervisors.values() for pid in s.supervisor.workers}
        pids |= {str(pid) for pid in self.world.orphans}
        held: dict[str, list[str]] = {}
        for row in sqlfile.rows(self.conn, "pool_live_owners"):
            parts = str(row["owner"]).split(":")
            if len(parts) >= 3 and parts[1] in pids:
                held.setdefault(parts[1], []).append(row["id"])
        for pid, runs in held.items():
            if len(runs) > 1:
                self.problems.append(
                    Violation(
                        "pool_one_run",
                        runs[0],
                        None,
                        f"pool worker {pid} holds live leases on {', '.join(runs)} at once",
                    )
                )
