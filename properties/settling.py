"""The supervisor's claim of expired runs, and the teardown that finishes every run.

A base of :class:`~properties.runner.ScheduleRunner`: a ``sweep`` claims through
:meth:`Settling._claim_expired` (a claim of a live lease is a ``live_claim``), and
:meth:`Settling.settle` clears the faults, lets every waiting worker go, resolves what
is parked as a careful operator would, and claims every unfinished run until it is done.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Final

from agent_runtime.store.records import Lease, RunTask

from . import sqlfile
from .agents import suite_agents
from .events import RUNS
from .operators import Operators
from .pilots import Start
from .variants import Variant
from .violations import Violation

SETTLE_TRIES: Final = 8  # claims teardown gives one run before calling it unfinished
EPOCH: Final = datetime(2030, 1, 1, tzinfo=UTC)  # where the frozen clock starts each example
# the agents whose runs the suite's sweeps claim: all of the suite's
AGENTS: Final = tuple(a.name for a in suite_agents("http://support").values())


class Settling(Operators):
    """Claims and the teardown; the runner supplies the clock and the statuses."""

    variant: Variant  # what ScheduleRunner sets
    supervisor: str
    trace: list[str]

    if TYPE_CHECKING:  # what ScheduleRunner provides

        def _advance(self, seconds: float) -> None: ...

        def _statuses(self) -> dict[str, str]: ...

        def _start(self, run: str, **how: Any) -> Start: ...

        def _note_generations(self) -> None: ...

    def _claim_expired(self) -> list[tuple[Lease, RunTask]]:
        """The supervisor's own claim, each lease with what the claim read of its run (the
        supervisor hands both to the worker); a claim of a lease that was live is a
        violation."""
        before = {row["id"]: row for row in sqlfile.rows(self.conn, "leases")}
        rows = self.variant.claim(self.conn, self.sweep_params())
        # The claim answers longest idle first (claim_expired orders its answer: an UPDATE's
        # own rows come in the table's physical order). Sorted here again all the same: a
        # broken runtime's claim must not make the workers' labels replay differently.
        rows.sort(
            key=lambda r: (
                (before[r["id"]]["updated_at"], r["id"]) if r["id"] in before else (EPOCH, r["id"])
            )
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
        return [
            (
                Lease(run_id=r["id"], owner=r["owner"], generation=r["generation"]),
                RunTask(agent=r["agent"], input=r["input"]),
            )
            for r in rows
        ]

    def sweep_params(self) -> dict[str, Any]:
        """The supervisor's sweep's parameters (``claim_expired``)."""
        return {
            "owner": self.supervisor,
            "lease": self.settings.lease,
            "limit": RUNS,
            "max_attempts": self.settings.max_attempts,
            "agents": list(AGENTS),
        }

    def settle(self) -> None:
        """Clear the faults, let every waiting worker go, finish every run through claims."""
        self._note_generations()  # a zombie's write from here on is judged like any other
        self.unchanged = None
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
            # one read of every status per pass: resolving a run changes only its own
            parked = self._statuses()
            for run in self.started:
                if parked.get(run) == "needs_attention":
                    self.trace.append(f"settle {run}: " + self._resolve(run))
                    self._settle_check()
            statuses = self._statuses()
            unfinished = [r for r in self.started if statuses.get(r) in ("pending", "running")]
            if not unfinished:
                if not any(statuses.get(r) == "needs_attention" for r in self.started):
                    return
                # a redo refused while the call's request may still land: the operator
                # waits out the in-flight bound, then resolves it on the next pass
                self._advance(self.settings.in_flight + 1)
                continue
            # every worker of these is gone: one lease and the longest backoff later, all
            # of them must be claimable
            self._advance(self.settings.lease + self.settings.run_backoff_cap + 1)
            claimed = {lease.run_id: (lease, task) for lease, task in self._claim_expired()}
            for run in unfinished:
                handed = claimed.get(run)
                if handed is None:
                    self.problems.append(
                        Violation(
                            "stranded",
                            run,
                            None,
                            "no live worker holds it, yet a lease and a second later the "
                            "supervisor still cannot claim it",
                        )
                    )
                    start = self._start(run, takeover=True)
                else:
                    start = self._start(run, lease=handed[0], task=handed[1])
                self.stats.restarts += 1
                w = self._pilot_rec(start)
                self.trace.append(f"settle {run}: claimed by " + self._drive(w, lambda g: "go"))
                self._settle_check()

    def _settle_check(self) -> None:
        self.check()
        self._note_generations()

    def _disarm(self) -> None:
        left = self.remotes.model_faults()
        unused = sum(int(left[k]) for k in left)
        self.bad_answers_issued -= unused  # armed but never served: nothing to explain
        self.remotes.set_model_faults(**dict.fromkeys(left, 0))
        self.remotes.set_cloud_faults(fail_before=0, drop_after=0, latency=0.0, hold_next=0)
        self.remotes.set_desk_faults(fail_lookups=0)
