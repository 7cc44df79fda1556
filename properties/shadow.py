"""The shadow: every row the suite has seen, and what may never happen to it.

After every event the new snapshot is compared with what was seen before:

- a decision or an intent never disappears or changes (an intent may only become
  confirmed, under the same key); a confirm never changes; a done run stays done; a
  run's generation never goes back;
- no row appears written by a generation older than the run's generation when the event
  began (a *stale write*: fencing let a worker that lost its lease write);
- across a **database crash** the same holds for everything the protocol makes durable
  before acting on it (intents, status changes, claims). Two writes commit without
  waiting for the flush, and a crash may take them back: a model answer with its decisions
  may vanish as long as nothing durable came after it (:func:`decision_may_vanish`), and
  then the model is asked again; and a confirm of a ``keyed``, ``checked`` or ``read``
  call may revert to its intent, and then its contract must bring the lost result back
  unchanged: a keyed re-send answered ``already_done``, a checked call's check ``found``,
  a read read again. A ``once`` call's confirm is durable.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from .observe import CallRow, DecisionRow, Snapshot
from .violations import Violation

# How each contract brings back a confirm a database crash took: the remote status then.
RECOVERED = {"keyed": "already_done", "checked": "found", "read": "read", "once": "operator"}


def decision_may_vanish(shadow: Shadow, run: str, seq: int) -> bool:
    """Whether a database crash may take back the decision of (run, seq), as seen before it.

    An answer and its decisions commit without waiting for the WAL flush; the next durable
    commit flushes them too, since WAL is sequential (ARCHITECTURE.md, "What a database
    crash can lose"). So the answer may vanish, all its decisions together, only while
    nothing durable of its run was seen after it: no intent of any of its calls or of a
    later step (the call goes out only after its intent's durable commit), the run not done
    (the finish is durable), no later claim (its generation still the run's). A durable
    commit of another run or of a heartbeat flushes it as well; the rule allows more than
    can happen, never less.
    """
    seen = shadow.decisions[run]
    llm_call = seen[seq].llm_call
    first = min(s for s, d in seen.items() if d.llm_call == llm_call)
    if any(s >= first for s in shadow.calls.get(run, {})) or run in shadow.done:
        return False
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

    def database_crashed(self) -> None:
        self.crashed = True

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

    def check_and_update(self, now: Snapshot, gen_before: dict[str, int]) -> list[Violation]:
        found = self._decisions(now) + self._calls(now) + self._runs(now)
        found += self._stale_writes(now, gen_before)
        for run, decisions in now.decisions.items():
            self.decisions[run].update(decisions)
        for run, calls in now.calls.items():
            self.calls[run].update(calls)
        self.done |= {r.id for r in now.runs.values() if r.status == "done"}
        self.generations.update({r.id: r.generation for r in now.runs.values()})
        self.crashed = False
        return found

    def _decisions(self, now: Snapshot) -> list[Violation]:
        found: list[Violation] = []
        for run, seen in self.decisions.items():
            for seq, old in list(seen.items()):
                new = now.decisions.get(run, {}).get(seq)
                if new is None and self.crashed and decision_may_vanish(self, run, seq):
                    del seen[seq]
                    self.vanished.append((run, seq))
                elif new is None:
                    why = " after a database crash" if self.crashed else ""
                    found.append(
                        Violation("lost_state", run, seq, f"decision {_d(old)} is gone{why}")
                    )
                elif new != old:
                    found.append(
                        Violation(
                            "lost_state", run, seq, f"decision changed from {_d(old)} to {_d(new)}"
                        )
                    )
        return found

    def _calls(self, now: Snapshot) -> list[Violation]:
        found: list[Violation] = []
        for run, seen in self.calls.items():
            for seq, old in seen.items():
                new = now.calls.get(run, {}).get(seq)
                why = " after a database crash" if self.crashed else ""
                if new is None:
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
                    if self.crashed and new.state == "intent":
                        self.lost_confirms[run, seq] = old  # allowed: it must be re-sent
                    else:
                        found.append(
                            Violation(
                                "lost_state",
                                run,
                                seq,
                                f"confirmed call changed from {_c(old)} to {_c(new)}{why}",
                            )
                        )
        for (run, seq), lost in list(self.lost_confirms.items()):
            new = now.calls.get(run, {}).get(seq)
            if new is None or new.state != "confirmed":
                continue
            del self.lost_confirms[run, seq]
            same = (new.result or {}).get("id") == (lost.result or {}).get("id")
            if new.remote_status != RECOVERED.get(new.effect) or not same:
                found.append(
                    Violation(
                        "lost_state",
                        run,
                        seq,
                        f"the confirm {_c(lost)} ({new.effect}) was lost in a database crash; "
                        f"it must come back {RECOVERED.get(new.effect)} with the same result, "
                        f"got {_c(new)}",
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
        return found

    def _stale_writes(self, now: Snapshot, gen_before: dict[str, int]) -> list[Violation]:
        found: list[Violation] = []
        for run, floor in gen_before.items():
            for seq, d in now.decisions.get(run, {}).items():
                if seq not in self.decisions[run] and d.generation < floor:
                    found.append(_stale(run, seq, "decision", d.generation, floor))
            for seq, c in now.calls.get(run, {}).items():
                old = self.calls[run].get(seq)
                if old is None and c.generation < floor:
                    found.append(_stale(run, seq, "intent", c.generation, floor))
                confirmed_now = c.state == "confirmed" and (old is None or old.state != "confirmed")
                if c.remote_status == "operator" and c.confirm_generation is None:
                    continue  # an operator's confirm: no worker wrote it (remote_truth checks it)
                if confirmed_now and (c.confirm_generation or 0) < floor:
                    found.append(_stale(run, seq, "confirm", c.confirm_generation or 0, floor))
        return found


def _stale(run: str, seq: int, what: str, generation: int, floor: int) -> Violation:
    return Violation(
        "lost_state",
        run,
        seq,
        f"stale write: a {what} by generation {generation} appeared after generation "
        f"{floor} had taken the run over (fencing let a worker that lost its lease write)",
    )


def _d(d: DecisionRow) -> str:
    return f"{d.tool}{d.args} (llm_call {d.llm_call}, generation {d.generation})"


def _c(c: CallRow) -> str:
    rid = (c.result or {}).get("id")
    return f"{c.state} {c.key} result={rid} remote={c.remote_status}"
