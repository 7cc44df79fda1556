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
from dataclasses import dataclass
from typing import Any, Final

from agent_runtime.errors import RunUnavailable
from agent_runtime.operator.actions import cancel_run, resolve_call, retry_run
from agent_runtime.operator.attention import Choice

from . import sqlfile
from .baseline import Baseline
from .disruptions import Disruptions
from .driving import FENCED, WorkerRec
from .events import Event
from .observe import CallRow, DecisionRow, Snapshot
from .pilots import Exit, Gate
from .remotes import Answer
from .violations import Violation

# Whether the runtime fences a cancelled worker's keyed requests at the remote (DESIGN.md
# section 9): it does since issue 21's point 3, so the suite checks it in every schedule.
REMOTES_FENCED_ON_CANCEL: Final = True
ACCEPTED: Final = frozenset({"created", "already_done"})  # a remote acted, or said it had
CANCEL_REASON: Final = "the schedule's operator"


@dataclass(frozen=True, kw_only=True)
class Fence:
    """A cancelled run as the snapshot right after the cancel saw it."""

    generation: int
    decisions: dict[int, DecisionRow]
    calls: dict[int, CallRow]
    model_calls: int
    answered: dict[str, int]  # by remote, the last answer logged before the cancel


class Operators(Disruptions):
    """The operator's events and their invariants, for the schedule runner."""

    remote_fence: bool = REMOTES_FENCED_ON_CANCEL

    def _clear_workers(self) -> None:
        super()._clear_workers()
        self.cancelled: dict[str, Fence] = {}
        self.operated: set[str] = set()  # runs an operator changed since the last check
        self.confirmed_by: dict[tuple[str, int], Any] = {}  # what an operator confirmed
        # the generation each run had when an operator's retry cleared its owner: a worker
        # of that generation or older is fenced from then on, by the operator's hand
        self.retried_at: dict[str, int] = {}

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
        now = self.observe()
        answered: dict[str, int] = {}
        for a in now.answers:
            answered[a.remote] = max(answered.get(a.remote, 0), a.seq)
        self.cancelled[run] = Fence(
            generation=now.runs[run].generation,
            decisions=dict(now.decisions.get(run, {})),
            calls=dict(now.calls.get(run, {})),
            model_calls=now.model_calls.get(run, 0),
            answered=answered,
        )
        self.operated.add(run)
        self._count_operator("cancel")
        at = [f"{w.label} at {g.point} seq={g.seq}" for w, g in self._at_gates(run)]
        return f"cancelled (was {done.previous_status}" + "".join(f"; {s}" for s in at) + ")"

    def _on_retry(self, e: Event) -> str:
        run = e.run_name
        if run not in self.started:
            return "skipped (not started)"
        try:
            done = retry_run(self.conn, run)
        except RunUnavailable:
            self._count_operator("retry refused")
            held = self._status(run)
            if held in ("pending", "running"):
                held = "held by a live lease"
            return f"refused: the run is {held}"
        self.operated.add(run)
        generation = self._run_generation(run)
        if generation is not None:
            self.retried_at[run] = generation
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
        """A worker of a cancelled run is refused at its next write, or at its claim."""
        refused = message.kind in FENCED or message.kind == "RunUnavailable"
        if refused and w.run in self.cancelled and self._status(w.run) == "cancelled":
            return True
        if message.kind in FENCED and w.run in self.retried_at:  # its lease lapsed, retried
            gen = self._generation(w)
            if gen is not None and gen <= self.retried_at[w.run]:
                return True
        return super()._expected(w, message)

    def _operated(self) -> set[str]:
        return set(self.operated)

    def _lease_changes(self, before: Snapshot | None, now: Snapshot) -> list[Violation]:
        """A cancel or a retry clears the owner and the lease by the operator's hand."""
        found = [v for v in super()._lease_changes(before, now) if v.run not in self.operated]
        self.operated.clear()
        return found

    def _lease_checks(self, now: Snapshot) -> list[Violation]:
        return super()._lease_checks(now) + self._fenced_by_cancel(now) + self._confirms(now)

    def _fenced_by_cancel(self, now: Snapshot) -> list[Violation]:
        found: list[Violation] = []
        for run, fence in self.cancelled.items():
            row = now.runs.get(run)
            said: list[str] = []
            if row is not None and row.status != "cancelled":
                said.append(f"it is {row.status} again")
            if row is not None and row.generation != fence.generation:
                said.append(f"it was claimed (generation {fence.generation} -> {row.generation})")
            for seq, d in now.decisions.get(run, {}).items():
                if fence.decisions.get(seq) != d:
                    said.append(f"decision seq={seq} ({d.tool}) was written")
            for seq, c in now.calls.get(run, {}).items():
                old = fence.calls.get(seq)
                reverted = old is not None and old.state == "confirmed" and c.state == "intent"
                if old is None or (old.state != c.state and not reverted):
                    said.append(f"{c.key} became {c.state}")
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
