"""How a worker ended, judged against what the schedule explains (the ``worker`` check),
and what a stop must leave behind: a resumable stop frees the run (``released``), a
permanent error fails it for good (``failed``), and nothing is left open (``leak``).
"""

from __future__ import annotations

import os
from typing import Final

from agent_runtime.operator.snapshot import list_runs

from . import sqlfile
from .driving import FENCED, Driving, WorkerRec
from .pilots import CRASHED, DONE, Exit, on_another_host
from .violations import Violation

MODEL_ERRORS: Final = frozenset({"MalformedAnswer", "UnknownTool", "InvalidArguments"})
# permanent errors a schedule can cause: the worker fails the run for good
PERMANENT: Final = frozenset({"TooManyBadAnswers"})


def kind_is_outage(kind: str) -> bool:
    """A worker's resumable stop on a remote's outage (it releases the run)."""
    return kind == "RemoteUnavailable"


class Endings(Driving):
    """The endings half of the runner's bookkeeping; :class:`Driving` calls :meth:`_ended`."""

    def _ended(self, w: WorkerRec, message: Exit) -> str:
        w.state = "exited"
        w.exit = message
        if self.active.get(w.run) is w:
            self.active[w.run] = None
        if w in self.waiting.get(w.run, []):
            self.waiting[w.run].remove(w)
        expected = self._expected(w, message)
        if w.ask is not None:
            w.ask.lose(f"{w.label} ended: {message.kind}", expected)
            w.ask = None
        w.deciding = None
        if expected and kind_is_outage(message.kind) and not w.dropped:
            self._check_released(w, message)
        if expected and message.kind in PERMANENT and not w.dropped:
            self._check_failed(w, message)
        sibling = w.pilot.owner.split(":")[1:2] == [str(os.getpid())]  # a thread of ours
        if message.kind == CRASHED and (w.pilot.gone or sibling) and self._holds_live_lease(w):
            # its lease is live, its process gone: provably so only on this host; a thread
            # of this process (which lives on) is never gone
            self._check_owner_view(w, gone=w.pilot.gone and not on_another_host(w.pilot.owner))
        if w.pilot.leaked:
            self.problems.append(
                Violation("leak", w.run, None, f"{w.label} ended, leaving open {w.pilot.leaked}")
            )
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
        if kind == DONE:  # it returned: the run is done (or was), never stopped short
            return self._status(w.run) not in ("cancelled", "failed", "needs_attention")
        if kind == CRASHED:
            return w.crashed_by_us
        if kind in FENCED:
            gen, now = self._generation(w), self._run_generation(w.run)
            return gen is not None and now is not None and now > gen
        if kind == "DatabaseError":
            return w.dropped
        if kind in MODEL_ERRORS:
            left = self.remotes.model_faults()
            served = self.bad_answers_issued - sum(int(left[k]) for k in left)
            if served > self.bad_answers_used:
                self.bad_answers_used += 1
                return True
            return False
        if kind == "RemoteUnavailable":  # every attempt of one call failed
            return self.failures_armed >= w.settings.tool_retries + 1
        if kind == "TooManyBadAnswers":  # more answers had a call refused than it may show
            row = sqlfile.one(self.conn, "failed_run", {"run": w.run})
            return row is not None and row["bad_answers"] > w.settings.max_bad_answers
        if kind == "CallInFlight":  # a checked call whose earlier attempt may still land
            found = sqlfile.one(self.conn, "in_flight_release", {"run": w.run})
            if not (found and found["explained"]):
                return False
            # its own intent, and it sent nothing under it: nothing of it can be in flight
            mine = found["generation"] == self._generation(w)
            return not mine or any(
                a.key == found["key"] and a.generation == found["generation"]
                for a in self.remotes.answers()
            )
        if kind == "NeedsAttention":  # parked, or found parked
            return self._status(w.run) == "needs_attention"
        if kind == "RunUnavailable":  # cancelled before it began (pool mode: the operator's
            # cancel between the supervisor's claim and the worker's adoption), or failed for
            # good by a permanent error the schedule caused; a parked run is refused as
            # NeedsAttention (exit 6, not 5: an operator's script tells the two apart)
            status = self._status(w.run)
            failed = status == "failed" and w.run in self.failed_for_good
            return failed or status == "cancelled"
        if kind == "BackingOff":  # a restart of a run released on an error, before its wait
            row = sqlfile.one(self.conn, "lease_of", {"run": w.run})
            waiting = row is not None and row["owner"] is None and row["lease_expires_at"]
            return bool(waiting and row is not None and row["lease_expires_at"] > row["now"])
        return False

    def _check_released(self, w: WorkerRec, message: Exit) -> None:
        """A resumable stop of the run's owner leaves the run free for the next claim: no
        owner, still running, claimable again from its backoff (``lease_expires_at``)."""
        row = sqlfile.one(self.conn, "lease_of", {"run": w.run})
        if row is None or row["generation"] != self._generation(w):
            return  # taken over meanwhile: its stop may free nothing (the release is fenced)
        backoff = row["lease_expires_at"]
        free = row["owner"] is None and row["status"] == "running"
        if free and backoff is not None and backoff >= row["now"]:
            self._check_owner_view(w, gone=False)  # it backs off: nobody's owner is gone
            return
        self.problems.append(
            Violation(
                "released",
                w.run,
                w.gate.seq if w.gate else None,
                f"{w.label} stopped with {message.kind} holding generation {row['generation']}, "
                f"yet the run is {row['status']}, owned by {row['owner']}, lease until "
                f"{backoff}: a resumable stop frees the run until its backoff has passed",
            )
        )

    def _check_failed(self, w: WorkerRec, message: Exit) -> None:
        """A permanent error of the run's owner fails the run for good, at once: failed, no
        owner, no lease, the error as its reason."""
        row = sqlfile.one(self.conn, "failed_run", {"run": w.run})
        if row is None or row["generation"] != self._generation(w):
            return  # taken over meanwhile: its failure is fenced, and fails nothing
        failed = row["status"] == "failed" and row["owner"] is None
        if failed and row["lease_expires_at"] is None and message.kind in (row["failure"] or ""):
            self.failed_for_good.add(w.run)
            return
        self.problems.append(
            Violation(
                "failed",
                w.run,
                w.gate.seq if w.gate else None,
                f"{w.label} stopped with {message.kind} holding generation {row['generation']}, "
                f"yet the run is {row['status']}, owned by {row['owner']}, lease until "
                f"{row['lease_expires_at']}, failure {row['failure']!r}: a permanent error "
                "fails the run at once, for good",
            )
        )

    def _check_owner_view(self, w: WorkerRec, *, gone: bool) -> None:
        """The operator's list of runs says the run's owner is gone exactly when it is: an
        operator takes a run over on that word."""
        listed = list_runs(self.conn, statuses=["running"], limit=None)
        said = next((r.owner_gone for r in listed.runs if r.id == w.run), None)
        if said is None or said == gone:
            return
        self.problems.append(
            Violation(
                "owner_view",
                w.run,
                w.gate.seq if w.gate else None,
                f"after {w.label} ended ({'its process gone' if gone else 'not provably gone'}), "
                f"the operator's list says owner_gone={said}",
            )
        )

    def _holds_live_lease(self, w: WorkerRec) -> bool:
        row = sqlfile.one(self.conn, "lease_of", {"run": w.run})
        expires = None if row is None else row["lease_expires_at"]
        return bool(
            row is not None
            and row["status"] == "running"
            and row["owner"] == w.pilot.owner
            and expires is not None
            and expires > row["now"]
        )
