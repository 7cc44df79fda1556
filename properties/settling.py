"""The supervisor's claim of expired runs, and the teardown that finishes every run.

A base of :class:`~properties.runner.ScheduleRunner`: a ``sweep`` claims through
:meth:`Settling._claim_expired` (a claim of a live lease is a ``live_claim``), an
``orphan_sweep`` claims the same way for a supervisor that dies before its hand-out, and
:meth:`Settling.settle` clears the faults, lets every waiting worker go, resolves what
is parked as a careful operator would, and claims every unfinished run until it is done.
"""

from __future__ import annotations

import subprocess
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Final

from agent_runtime.store.records import Lease, RunTask

from . import sqlfile
from .agents import suite_agents
from .events import RUNS, Event
from .operators import Operators
from .pilots import Start, owner_of
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

    def _on_orphan_sweep(self, e: Event) -> str:
        """A supervisor claims every expired run and dies before it hands any out (SIGKILL,
        an OOM kill, a node lost). Its claims name a pid that provably died (a process the
        suite ran and reaped), each as ``host:pid:nonce:run``: a restart may take such a run
        at once, proving the owner dead as it proves a worker's, and a sweep takes it once
        the orphaned lease ran out (a claim that calls this owner alive and forces it out is
        a ``claim_truth`` violation)."""
        seconds = e.seconds if e.seconds is not None else self.settings.lease + 1
        if seconds:
            self._advance(seconds)
        beats = self._beat_all()
        claimed = self._claim_expired(owner_of("orphaned", pid=_gone_pid()))
        for lease, _ in claimed:
            self.orphaned.add(lease.owner)
            old = self.active.get(lease.run_id)
            if old is not None:  # its lease ran out (the claim was checked): outpaced
                self._wait(old, frozen=False)
        self.stats.count("orphan sweep")
        runs = ", ".join(lease.run_id for lease, _ in claimed) or "nothing"
        return f"{beats}; a supervisor claimed {runs} and died before handing out"

    def _claim_expired(self, owner: str | None = None) -> list[tuple[Lease, RunTask]]:
        """The supervisor's own claim (``owner``: another supervisor's), each lease with what
        the claim read of its run (the supervisor hands both to the worker); a claim of a
        lease that was live is a violation."""
        before = {row["id"]: row for row in sqlfile.rows(self.conn, "leases")}
        params = self.sweep_params()
        rows = self.variant.claim(self.conn, {**params, "owner": owner or params["owner"]})
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


def _gone_pid() -> int:
    """The pid of a process that ran and was reaped: it names nobody now (a pid comes
    round again only after the kernel's pid_max others)."""
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid
