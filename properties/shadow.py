"""The shadow: every row the suite has seen, and what may never happen to it.

After every event the new snapshot is compared with what was seen before:

- a decision or an intent never disappears or changes (an intent may only become
  confirmed, under the same key); a confirm never changes; a done run stays done; a
  run's generation never goes back;
- no row appears written by a generation older than the run's generation when the event
  began (a *stale write*: fencing let a worker that lost its lease write);
- across a **database crash** the same holds for every write the design calls durable,
  and a relaxed one may go only while no durable write came after it. Which is which is
  :mod:`properties.durability`'s table, asked per write: the row or change that is gone
  is traced to the write that made it (a decision to ``record_decision``, a confirm to
  ``record_confirm`` under its call's contract, or to ``operator_resolve_call``, a run row
  back to an earlier state to the claim, adoption, renewal, release, park, failure or
  finish that had moved it on). A durable write flushes everything before it, whoever
  wrote it: one the shadow saw in any check after a relaxed row was first seen (a new
  intent, claim or run, a run row moved on, a ``once`` or an operator's confirm, the clock
  moved) makes that row durable too, as does a later durable write of its own run seen
  with it (:func:`decision_may_vanish`, :meth:`Shadow.confirm_may_revert`). A decision
  that vanished is asked again; a confirm that reverted to its intent must come back
  unchanged by its contract (:data:`RECOVERED`).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime

from . import durability
from . import shadow_text as text
from .durability import Write, confirm_write, run_state, run_write
from .observe import CallRow, DecisionRow, Snapshot
from .violations import Violation

# How each contract brings back a confirm a database crash took: the remote status then.
# A once call's confirm is durable (durability.WRITES): no crash takes it back.
RECOVERED = {"keyed": "already_done", "checked": "found", "read": "read"}

# The gates a worker reaches once its step's intent has returned (agent_runtime.crash).
INTENT_WRITTEN = ("after_intent", "after_call", "after_confirm")


def decision_may_vanish(shadow: Shadow, run: str, seq: int) -> bool:
    """Whether a database crash may take back the decision of (run, seq), as seen before it.

    An answer and its decisions are one relaxed write (``record_decision``); the next
    durable commit flushes them too, since WAL is sequential (ARCHITECTURE.md, "What a
    database crash can lose"). So the answer may vanish, all its decisions together, only
    while no durable write was seen after it: none in a later check (:meth:`Shadow.flushed`),
    and none of its run that comes after it whenever seen: no intent of any of its calls or
    of a later step (the call goes out only after its intent's durable commit), the run not
    done (the finish is durable), no later claim (its generation still the run's).
    """
    if not durability.relaxed("record_decision"):
        return False
    seen = shadow.decisions[run]
    llm_call = seen[seq].llm_call
    first = min(s for s, d in seen.items() if d.llm_call == llm_call)
    if shadow.flushed(("decision", run, first)):
        return False
    calls = shadow.calls.get(run, {})
    if any(s >= first and not text.refused(c) for s, c in calls.items()) or run in shadow.done:
        return False  # a refused call's row is the answer's own write, not an intent
    return shadow.generations.get(run, 0) <= seen[seq].generation


@dataclass
class Shadow:
    decisions: dict[str, dict[int, DecisionRow]] = field(default_factory=lambda: defaultdict(dict))
    calls: dict[str, dict[int, CallRow]] = field(default_factory=lambda: defaultdict(dict))
    done: set[str] = field(default_factory=set)
    generations: dict[str, int] = field(default_factory=dict)
    lost_confirms: dict[tuple[str, int], CallRow] = field(default_factory=dict)
    crashed: bool = False  # a database crash happened since the last check
    vanished: list[tuple[str, int]] = field(default_factory=list)  # decisions a crash took
    # each run's row states as seen, oldest first (a new one only when it changed)
    states: dict[str, list[durability.RunState]] = field(default_factory=dict)
    checks: int = 0  # checks so far; this one's number while it runs
    flushed_at: int = 0  # the last check (not a crash's) that saw a durable write
    # when each relaxed write was first seen: ("decision", run, first seq of its answer)
    # or ("confirm", run, seq) -> the check's number
    first_seen: dict[tuple[str, str, int], int] = field(default_factory=dict)
    clock: datetime | None = None  # the test clock at the last check
    crash_gates: list[tuple[str, str, int]] = field(default_factory=list)

    def flushed(self, key: tuple[str, str, int]) -> bool:
        """Whether a durable write was seen in a check after the one that first saw ``key``:
        it flushed the WAL, and that relaxed write with it."""
        return self.first_seen.get(key, self.checks) < self.flushed_at

    def confirm_may_revert(self, run: str, old: CallRow) -> bool:
        """Whether a database crash may take back the resolution ``old`` of a call: only a
        relaxed write (a worker's confirm of a keyed, checked or read call), while no durable
        write was seen after it: none in a later check, and none of its run that comes after
        it: no intent of a later step, the run not done, no later claim."""
        if confirm_write(old).commit != durability.RELAXED:
            return False
        if self.flushed(("confirm", run, old.seq)) or run in self.done:
            return False
        if any(s > old.seq for s in self.calls.get(run, {})):
            return False
        return self.generations.get(run, 0) <= (old.confirm_generation or 0)

    def database_crashed(self, gates: Iterable[tuple[str, str, int]] = ()) -> None:
        """A database crash, with the gates (run, point, seq) the live workers stood at: each
        had its writes up to there returned, so the durable ones among them must be there."""
        self.crashed = True
        self.crash_gates = list(gates)

    def lost_unseen(self, now: Snapshot, journaled: list[tuple[str, int]]) -> list[tuple[str, int]]:
        """Of the steps whose answers were ``journaled`` (run, seq), those a database crash
        since the last check took back before the shadow ever saw them: journaled in the
        very event that crashed the database. Allowed like a seen one that may vanish
        (:func:`decision_may_vanish`): nothing durable of them was seen either, and an
        intent written after one cannot outlive it (its durable commit flushes the WAL that
        holds the decision; the suite checks no call is without one), so a call that went
        out without a durable intent still shows in the remote's view."""
        if not self.crashed:
            return []
        return [
            (run, seq)
            for run, seq in journaled
            if seq not in now.decisions.get(run, {}) and seq not in self.decisions[run]
        ]

    def check_and_update(
        self, now: Snapshot, gen_before: dict[str, int], clock: datetime | None = None
    ) -> list[Violation]:
        """Judge ``now`` against what was seen; then remember it. ``clock``: the test clock
        now (a move is a durable write)."""
        self.checks += 1
        found = self._decisions(now) + self._calls(now) + self._runs(now) + self._returned(now)
        found += self._stale_writes(now, gen_before)
        if not self.crashed and any(
            w.commit == durability.DURABLE for w in self._writes_since(now, clock)
        ):
            self.flushed_at = self.checks  # a crash's: before or after it? not counted
        for run, decisions in now.decisions.items():
            firsts: dict[int, int] = {}  # each answer's first seq
            for seq, d in sorted(decisions.items()):
                firsts.setdefault(d.llm_call, seq)
            for first in firsts.values():
                self.first_seen.setdefault(("decision", run, first), self.checks)
            self.decisions[run].update(decisions)
        for run, calls in now.calls.items():
            for seq, c in calls.items():
                if c.state in ("confirmed", "failed"):
                    self.first_seen.setdefault(("confirm", run, seq), self.checks)
            self.calls[run].update(calls)
        for run, row in now.runs.items():
            states = self.states.setdefault(run, [])
            if not states or states[-1] != run_state(row):
                states.append(run_state(row))
        self.done |= {r.id for r in now.runs.values() if r.status == "done"}
        self.generations.update({r.id: r.generation for r in now.runs.values()})
        self.clock = clock if clock is not None else self.clock
        self.crashed = False
        self.crash_gates = []
        return found

    def _writes_since(self, now: Snapshot, clock: datetime | None) -> list[Write]:
        """The writes ``now`` shows since the last check, as the table names them."""
        writes: list[Write] = []
        if clock is not None and self.clock is not None and clock > self.clock:
            writes.append(durability.write("clock_advance"))
        for run, row in now.runs.items():
            states = self.states.get(run)
            if not states:
                writes.append(durability.write("create_run"))
            elif run_state(row) not in states:
                writes.append(run_write(states[-1], run_state(row)))
        for run, calls in now.calls.items():
            for seq, c in calls.items():
                old = self.calls[run].get(seq)
                if old is None and text.refused(c):
                    writes.append(durability.write("record_decision"))  # with its answer
                elif old is None:
                    writes.append(durability.write("record_intent"))
                elif (old.state, c.state) == ("intent", "redo"):
                    writes.append(durability.write("operator_resolve_call"))
                elif (old.state, c.state) == ("redo", "intent"):
                    writes.append(durability.write("redo_intent"))
                elif old.state in ("intent", "redo") and c.state in ("confirmed", "failed"):
                    writes.append(confirm_write(c))
        return writes

    def _returned(self, now: Snapshot) -> list[Violation]:
        """After a crash: the durable writes a worker at a gate had made of its step, even
        if no check saw them (made in the event that crashed), are there: the intent from
        ``after_intent`` on, the confirm at ``after_confirm`` if its contract's is durable."""
        found: list[Violation] = []
        for run, point, seq in self.crash_gates if self.crashed else []:
            if point not in INTENT_WRITTEN:
                continue
            call = now.calls.get(run, {}).get(seq)
            if call is None:
                w = durability.write("record_intent")
                if not durability.relaxed(w.statement):
                    gone = f"{w.what} `{w.statement}` had returned ({point})"
                    found.append(text.lost_returned(run, seq, gone))
            elif point == "after_confirm" and call.state == "intent":
                w = durability.write("record_confirm", call.effect)
                if not durability.relaxed(w.statement, call.effect):
                    gone = f"{w.what} `{w.statement}` ({call.effect}) had returned ({point})"
                    found.append(text.lost_returned(run, seq, gone))
        return found

    def _decisions(self, now: Snapshot) -> list[Violation]:
        found: list[Violation] = []
        for run, seen in self.decisions.items():
            for seq, old in list(seen.items()):
                new = now.decisions.get(run, {}).get(seq)
                if new is None and self.crashed and decision_may_vanish(self, run, seq):
                    first = min(s for s, d in seen.items() if d.llm_call == old.llm_call)
                    del seen[seq]
                    self.first_seen.pop(("decision", run, first), None)  # asked again
                    self.vanished.append((run, seq))
                elif new is None:
                    why = " after a database crash" if self.crashed else ""
                    found.append(
                        Violation("lost_state", run, seq, f"decision {text.d(old)} is gone{why}")
                    )
                elif new != old:
                    found.append(
                        Violation(
                            "lost_state",
                            run,
                            seq,
                            f"decision changed from {text.d(old)} to {text.d(new)}",
                        )
                    )
        return found

    def _calls(self, now: Snapshot) -> list[Violation]:
        found: list[Violation] = []
        went: list[tuple[str, int]] = []
        for run, seen in self.calls.items():
            for seq, old in seen.items():
                new = now.calls.get(run, {}).get(seq)
                why = " after a database crash" if self.crashed else ""
                if (
                    new is None
                    and self.crashed
                    and text.refused(old)
                    and seq not in self.decisions[run]
                ):
                    went.append((run, seq))  # refused in an answer the crash took back with it
                elif new is None:
                    gone = f"{old.state} {old.key} is gone{why}"
                    found.append(Violation("lost_state", run, seq, gone))
                elif new.key != old.key:
                    found.append(
                        Violation(
                            "lost_state",
                            run,
                            seq,
                            f"the call's idempotency key changed from {old.key} to {new.key}",
                        )
                    )
                elif old.state == "confirmed" and new != old:
                    reverted = self.crashed and new.state == "intent"
                    if reverted and self.confirm_may_revert(run, old):
                        self.lost_confirms[run, seq] = old  # allowed: it must be re-sent
                    elif reverted:
                        found.append(text.lost_durable(run, seq, old, self.flushed_at))
                    else:
                        found.append(
                            Violation(
                                "lost_state",
                                run,
                                seq,
                                f"confirmed call changed from {text.c(old)} to {text.c(new)}{why}",
                            )
                        )
        for run, seq in went:
            del self.calls[run][seq]
            self.first_seen.pop(("confirm", run, seq), None)
        for (run, seq), lost in list(self.lost_confirms.items()):
            new = now.calls.get(run, {}).get(seq)
            if new is None or new.state != "confirmed":
                continue
            del self.lost_confirms[run, seq]
            self.first_seen.pop(("confirm", run, seq), None)  # seen anew from here
            same = (new.result or {}).get("id") == (lost.result or {}).get("id")
            if new.remote_status != RECOVERED.get(new.effect) or not same:
                found.append(
                    Violation(
                        "lost_state",
                        run,
                        seq,
                        f"the confirm {text.c(lost)} ({new.effect}) was lost in a database crash; "
                        f"it must come back {RECOVERED.get(new.effect)} with the same result, "
                        f"got {text.c(new)}",
                    )
                )
        return found

    def _runs(self, now: Snapshot) -> list[Violation]:
        found: list[Violation] = []
        why = " after a database crash" if self.crashed else ""
        for run in sorted(self.done):
            status = now.runs[run].status if run in now.runs else "gone"
            if status != "done":
                found.append(Violation("lost_state", run, None, f"was done, is now {status}{why}"))
        for run, generation in sorted(self.generations.items()):
            row = now.runs.get(run)
            if row is not None and row.generation < generation:
                found.append(
                    Violation(
                        "lost_state",
                        run,
                        None,
                        f"its generation went back from {generation} to {row.generation}{why}: "
                        "a claim was lost",
                    )
                )
        if self.crashed:
            found += self._reverted_runs(now)
        return found

    def _reverted_runs(self, now: Snapshot) -> list[Violation]:
        """A run row a crash put back to a state seen before: the durable writes that had
        moved it on were lost (a done run or a generation gone back are reported above)."""
        found: list[Violation] = []
        for run, states in sorted(self.states.items()):
            row = now.runs.get(run)
            if row is None or run in self.done or row.generation < states[-1][2]:
                continue
            state = run_state(row)
            if state == states[-1] or state not in states:
                continue
            back = max(i for i, s in enumerate(states) if s == state)
            lost = run_write(states[back], states[back + 1])
            if lost.commit == durability.RELAXED:
                del states[back + 1 :]
                continue
            found.append(
                Violation(
                    "lost_state",
                    run,
                    None,
                    f"{lost.what} (`{lost.statement}`, a durable write) was lost in a database "
                    f"crash: the run is back to {text.s(state)} from {text.s(states[-1])}",
                )
            )
        return found

    def _stale_writes(self, now: Snapshot, gen_before: dict[str, int]) -> list[Violation]:
        found: list[Violation] = []
        for run, floor in gen_before.items():
            for seq, d in now.decisions.get(run, {}).items():
                if seq not in self.decisions[run] and d.generation < floor:
                    found.append(text.stale(run, seq, "decision", d.generation, floor))
            for seq, c in now.calls.get(run, {}).items():
                old = self.calls[run].get(seq)
                if old is None and c.generation < floor:
                    found.append(text.stale(run, seq, "intent", c.generation, floor))
                confirmed_now = c.state == "confirmed" and (old is None or old.state != "confirmed")
                if c.remote_status == "operator" and c.confirm_generation is None:
                    continue  # an operator's confirm: no worker wrote it (remote_truth checks it)
                if confirmed_now and (c.confirm_generation or 0) < floor:
                    found.append(text.stale(run, seq, "confirm", c.confirm_generation or 0, floor))
        return found
