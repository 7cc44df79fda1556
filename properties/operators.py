"""The operator mid-step: ``cancel``, ``retry`` and ``resolve --confirm/--redo/--fail`` as
schedule events, landing while the run's workers stand at any gate, and what must hold
after them.

Each event calls exactly the function the command line calls
(:mod:`agent_runtime.operator.actions`): ``cancel_run``, ``retry_run``, ``resolve_call``.
A refusal (a done run cancelled, a live run retried) is part of the trace, never a skip.

**cancel_fence** (DESIGN.md section 9: "an operator's cancel fences like a claim"): once
a run is cancelled it stays cancelled, and nothing anyone sends for it afterwards is
accepted: no claim, no decision, no intent, no confirm, no model call, and no request a
remote acts on (``created`` or ``already_done``). The snapshot taken right after the
cancel is the fence's floor. The remote half holds since issue 21's
point 3 (the worker reads its ownership after an intent, and every later attempt's start
is a fenced write): :data:`REMOTES_FENCED_ON_CANCEL`.

**operator_confirm**: a call an operator confirmed says what the operator said (its
result, ``remote_status`` operator); ``duplicate_effect`` already requires that it is
never sent again, and that a redo sends once more at most once.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Final

from agent_runtime.errors import RunUnavailable
from agent_runtime.operator.actions import cancel_run, resolve_call, retry_run
from agent_runtime.operator.attention import Choice

from . import sqlfile
from .baseline import Baseline
from .disruptions import Disruptions
from .driving import FENCED, WorkerRec
from .events import Event
from .fences import Fence, fence_of, journal_written, retry_fence
from .observe import Snapshot
from .pilots import CRASHED, DONE, Exit, Gate
from .remotes import Answer
from .violations import Violation

# Whether the runtime fences a cancelled worker's keyed requests at the remote (DESIGN.md
# section 9): it does since issue 21's point 3, so the suite checks it in every schedule.
REMOTES_FENCED_ON_CANCEL: Final = True
ACCEPTED: Final = frozenset({"created", "already_done"})  # a remote acted, or said it had
CANCEL_REASON: Final = "the schedule's operator"


class Operators(Disruptions):
    """The operator's events and their invariants, for the schedule runner."""

    remote_fence: bool = REMOTES_FENCED_ON_CANCEL

    def _clear_workers(self) -> None:
        super()._clear_workers()
        self.cancelled: dict[str, Fence] = {}
        self.operated: set[str] = set()  # runs an operator changed since the last check
        self.confirmed_by: dict[tuple[str, int], Any] = {}  # what an operator confirmed
        # each retried run as the operator's retry left it: a worker of its generation or
        # older is fenced from then on, by the operator's hand (the owner cleared)
        self.retried: dict[str, Fence] = {}

    # -- events --------------------------------------------------------------------------------

    def _on_cancel(self, e: Event) -> str:
        run = e.run_name
        if run not in self.started:
            return "skipped (not started)"
        try:
            done = cancel_run(self.conn, run, CANCEL_REASON)
        except RunUnavailable:
            self._count_operator("cancel refused")
            return f"refused: the run is {self._status(run)}"
        if done.already:
            return "refused: already cancelled"
        self.cancelled[run] = fence_of(self.observe(), run)
        self.operated.add(run)
        self._count_operator("cancel")
        at = [f"{w.label} at {g.point} seq={g.seq}" for w, g in self._at_gates(run)]
        return f"cancelled (was {done.previous_status}" + "".join(f"; {s}" for s in at) + ")"

    def _on_retry(self, e: Event) -> str:
        run = e.run_name
        if run not in self.started:
            return "skipped (not started)"
        lease = sqlfile.one(self.conn, "lease_of", {"run": run})  # as the operator asks
        owned = lease is not None and lease["owner"] is not None
        try:
            done = retry_run(self.conn, run)
        except RunUnavailable:
            self._count_operator("retry refused")
            held = self._status(run)
            if held in ("pending", "running"):
                held = "held by a live lease"
            return f"refused: the run is {held}"
        if owned and lease is not None and lease["lease_expires_at"] > lease["now"]:
            self.problems.append(
                Violation(
                    "retried",
                    run,
                    None,
                    f"an operator's retry took the run from {lease['owner']}, whose lease was "
                    f"live until {lease['lease_expires_at']}: a held run's retry is refused",
                )
            )
        self.operated.add(run)
        seen = self.observe()
        if run in seen.runs:
            self.retried[run] = fence_of(seen, run)
        self._count_operator("retry")
        was, now = done.past.previous_status, self._status(run)
        want = "pending" if was == "failed" else was  # a free run keeps its status
        if done.status != want or now != want:
            self.problems.append(
                Violation(
                    "retried",
                    run,
                    None,
                    f"an operator's retry of a {was} run left it {now} (said {done.status}): "
                    f"a failed run goes back to pending, any other keeps its status ({want})",
                )
            )
        return f"retried (was {was}, now {done.status})"

    def _on_resolve(self, e: Event) -> str:
        if e.choice is None:  # the careful operator, once its workers are gone
            return super()._on_resolve(e)
        run = e.run_name
        status = self._status(run)
        if status in ("pending", "running"):
            return self._resolve_refused(run, e.choice, status)
        if status != "needs_attention":
            return "skipped (the run does not need attention)"
        doubt = sorted(c["seq"] for c in sqlfile.rows(self.conn, "calls_in_doubt", {"run": run}))
        if not doubt:
            return "skipped (nothing in doubt)"
        seq = doubt[0]
        key = f"{run}:{seq}"
        sent = [row for row in self.remotes.desk_rows() if row.key == key]
        # An operator looks at the desk first: confirm only what it delivered, redo or
        # give up only what it did not (anything else is an operator's mistake, which
        # tests/test_attention.py covers).
        if e.choice == "confirm":
            if not sent:
                return f"skipped (the desk delivered nothing under {key} to confirm)"
            result = {**sent[0].result, "status": "delivered"}
            self._resolved(run, seq, "confirm", result=result, reason="delivered")
            self.confirmed_by[run, seq] = result
        else:
            if sent:
                return f"skipped (the desk delivered {sent[0].id} under {key})"
            choice: Choice = "redo" if e.choice == "redo" else "fail"
            try:
                self._resolved(run, seq, choice, reason="the desk delivered nothing")
            except RunUnavailable as exc:  # its send may still land: an operator waits
                if "may still land" not in str(exc):
                    raise
                return f"skipped ({key} may still land)"
            if choice == "redo":
                self.redone[run, seq] = self.redone.get((run, seq), 0) + 1
        self.resolved.add(run)
        self._count_operator(f"resolve {e.choice}")
        at = "".join(f"; {w.label} waits" for w in self.workers if w.run == run and w.alive)
        return f"an operator resolved {key}: {e.choice}{at}"

    def _resolve_refused(self, run: str, choice: str, status: str) -> str:
        """An operator who decides an intent of a run its worker still drives: refused, and
        nothing of the run changes (the worker resolves its calls by their contracts)."""
        doubt = sorted(c["seq"] for c in sqlfile.rows(self.conn, "calls_in_doubt", {"run": run}))
        if not doubt:
            return f"skipped (the run is {status}, nothing in doubt)"
        how: Choice = "confirm" if choice == "confirm" else "redo" if choice == "redo" else "fail"
        try:
            resolve_call(
                self.conn, run, doubt[0], how, result={"status": "delivered"}, reason="too soon"
            )
        except RunUnavailable:
            self._count_operator("resolve refused")
            return f"refused: the run is {status}"
        self.problems.append(
            Violation(
                "resolve_refused",
                run,
                doubt[0],
                f"an operator's --{how} of call {run}:{doubt[0]} was accepted while the run was "
                f"{status}: only a parked or failed run's calls are an operator's to decide",
            )
        )
        return f"accepted while {status}"

    def _count_operator(self, what: str) -> None:
        self.stats.count("operator " + what)
        self.on_event("operator " + what)

    def _at_gates(self, run: str) -> Iterable[tuple[WorkerRec, Gate]]:
        return ((w, w.gate) for w in self.workers if w.run == run and w.alive and w.gate)

    # -- how a worker may end, and what the checks excuse --------------------------------------

    def _expected(self, w: WorkerRec, message: Exit) -> bool:
        """A worker of a cancelled run is refused at its next write, or at its claim; one
        whose run an operator retried under it can never finish it (its finish is a write)."""
        refused = message.kind in FENCED or message.kind == "RunUnavailable"
        if refused and w.run in self.cancelled and self._status(w.run) == "cancelled":
            return True
        fenced_by = self._fenced_by_operator(w)
        if message.kind in FENCED and fenced_by == "retry":  # its lease lapsed, retried
            return True
        if message.kind == DONE and fenced_by == "retry":
            return False
        return super()._expected(w, message)

    def _fenced_by_operator(self, w: WorkerRec) -> str | None:
        """``cancel`` or ``retry`` when an operator's action took ``w``'s run while ``w``
        held it (without a new generation: the owner cleared), else None."""
        gen = self._generation(w)
        if gen is None:
            return None
        fence = self.cancelled.get(w.run)
        if fence is not None and gen <= fence.generation:
            return "cancel"
        retried = self.retried.get(w.run)
        return "retry" if retried is not None and gen <= retried.generation else None

    def _check_failed(self, w: WorkerRec, message: Exit) -> None:
        if self._fenced_by_operator(w) is None:  # else its failure was refused: _ended
            super()._check_failed(w, message)

    def _check_released(self, w: WorkerRec, message: Exit) -> None:
        if self._fenced_by_operator(w) is None:  # else its release was refused: _ended
            super()._check_released(w, message)

    def _ended(self, w: WorkerRec, message: Exit) -> str:
        said = super()._ended(w, message)
        fenced_by = self._fenced_by_operator(w)
        if fenced_by is not None and message.kind not in (DONE, CRASHED, *FENCED):
            self._check_nothing_recorded(w, message, fenced_by)
        return said

    def _check_nothing_recorded(self, w: WorkerRec, message: Exit, fenced_by: str) -> None:
        """``w`` stopped (any error) after an operator took its run: its stop, a failure or
        a release, is refused like any write of a fenced worker, so the run must not carry
        it (``operator_fence``; a cancelled run's state is ``cancel_fence``'s to judge)."""
        row = sqlfile.one(self.conn, "failed_run", {"run": w.run})
        if row is None or row["generation"] != self._generation(w):
            return  # claimed since: the claim fenced it again
        if message.kind in (row["failure"] or ""):
            self.problems.append(
                Violation(
                    "operator_fence",
                    w.run,
                    w.gate.seq if w.gate else None,
                    f"{w.label} stopped with {message.kind} after an operator's {fenced_by} "
                    f"took its run (generation {row['generation']}), yet the run is "
                    f"{row['status']}, owned by {row['owner']}, failure {row['failure']!r}: "
                    "a worker fenced by an operator records nothing at its stop",
                )
            )

    def _operated(self) -> set[str]:
        return set(self.operated)

    def _lease_changes(self, before: Snapshot | None, now: Snapshot) -> list[Violation]:
        """A cancel or a retry clears the owner and the lease by the operator's hand."""
        found = [v for v in super()._lease_changes(before, now) if v.run not in self.operated]
        self.operated.clear()
        return found

    def _lease_checks(self, now: Snapshot) -> list[Violation]:
        by_retry = [retry_fence(run, fence, now) for run, fence in self.retried.items()]
        return (
            super()._lease_checks(now)
            + self._fenced_by_cancel(now)
            + [v for v in by_retry if v is not None]
            + self._confirms(now)
        )

    def _fenced_by_cancel(self, now: Snapshot) -> list[Violation]:
        found: list[Violation] = []
        for run, fence in self.cancelled.items():
            row = now.runs.get(run)
            said: list[str] = []
            if row is not None and row.status != "cancelled":
                said.append(f"it is {row.status} again")
            if row is not None and row.generation != fence.generation:
                said.append(f"it was claimed (generation {fence.generation} -> {row.generation})")
            said += journal_written(run, fence, now)
            if now.model_calls.get(run, 0) > fence.model_calls:
                said.append(f"the model was asked ({now.model_calls[run]} calls)")
            if self.remote_fence:
                for a in now.answers:
                    sent = self._sent_at(now, a)  # a landing: when its request arrived
                    late = sent > fence.answered.get(a.remote, 0)
                    if a.run == run and late and a.answer in ACCEPTED:
                        said.append(
                            f"the {a.remote} accepted {a.key} from generation {a.generation} "
                            f"({a.answer})"
                        )
            if said:
                found.append(
                    Violation(
                        "cancel_fence",
                        run,
                        None,
                        "an operator cancelled the run, yet "
                        + "; ".join(said)
                        + ": nothing sent for a cancelled run may be accepted afterwards",
                    )
                )
        return found

    def _sent_at(self, now: Snapshot, a: Answer) -> int:
        """Where in its remote's log the request ``a`` answers arrived: its own place, or,
        for a held request that landed, the place of the ``held`` answer its sender got."""
        if (a.remote, a.seq) not in self.landed:
            return a.seq
        arrivals = [
            h.seq
            for h in now.answers
            if h.remote == a.remote and h.key == a.key and h.generation == a.generation
            and h.answer == "held" and h.seq < a.seq
        ]  # fmt: skip
        return max(arrivals, default=a.seq)

    def _confirms(self, now: Snapshot) -> list[Violation]:
        found: list[Violation] = []
        for (run, seq), result in self.confirmed_by.items():
            call = now.calls.get(run, {}).get(seq)
            if call is None or call.state != "confirmed" or call.remote_status != "operator":
                state = "missing" if call is None else f"{call.state} ({call.remote_status})"
                said = f"confirmed by an operator, now {state}"
                found.append(Violation("operator_confirm", run, seq, said))
            elif call.result != result:
                found.append(
                    Violation(
                        "operator_confirm",
                        run,
                        seq,
                        f"an operator confirmed it with {result}, the journal says {call.result}",
                    )
                )
        return found

    def _settling(self) -> dict[str, Baseline]:
        """The runs the teardown must finish: a cancelled run is final (the fence checks it)."""
        return {r: b for r, b in super()._settling().items() if r not in self.cancelled}
