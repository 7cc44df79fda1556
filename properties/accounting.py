"""Every model call, accounted for: who asked, about which step, and what became of it.

The mock model counts every decide request per run (the ground truth for "asked
twice"). The runner reads that counter at every gate; when it moved between two gates
of a worker, that worker asked, about the step whose ``before_decide`` it passed last.
Each such :class:`Ask` ends one way: *journaled* (the worker passed ``after_decide``),
*lost* (with a reason, excused or not), or it stays *pending* while the worker holds it::

    asks(run, seq) = [seq decided]                 -- the one journaled answer
                   + crashes at after_decide_before_journal on seq
                   + answers held by a worker that was then fenced (a zombie)
                   + answers held by a worker whose database connection went away
                   + answers whose decision a database crash took back
                   + unusable answers (a model fault)
                   + answers still held by a paused or stalled worker

An ask by a worker that no longer owned its run (its generation older than the run's
when it asked) is never excused: the ownership check before every model call exists so
that a zombie does not buy an answer.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Any, Final

from .observe import Snapshot
from .violations import Violation

_NUMBER: Final = re.compile(r"-(\d+)")  # the provisioning plan's names: srv-3
_CALL_NUMBER: Final = re.compile(r"\(#(\d+)\)")  # the support plan's texts: "(#3)"


@dataclass(kw_only=True)
class Ask:
    """One model call, as the runner saw it happen between two gates of one worker."""

    run: str
    seq: int | None  # the step the worker was deciding (None: outside a decide)
    number: int  # the model's call count for the run after this call
    worker: str
    generation: int | None = None  # the asking worker's generation
    run_generation: int | None = None  # the run's generation when it asked
    fate: str = "pending"  # pending | journaled | lost
    reason: str = ""
    excused: bool = False

    @property
    def stale(self) -> bool:
        return (
            self.generation is not None
            and self.run_generation is not None
            and self.generation < self.run_generation
        )

    def lose(self, reason: str, excused: bool) -> None:
        self.fate = "lost"
        self.reason = reason
        self.excused = excused and not self.stale


def name_number(args: dict[str, Any]) -> int | None:
    """The call number the mock model writes into what it decides (``srv-3`` -> 3, a
    summary or subject ending ``(#3)`` -> 3); None when the arguments carry none."""
    match = _NUMBER.search(str(args.get("name", "")))
    if match:
        return int(match.group(1))
    for field in ("summary", "subject"):
        found = _CALL_NUMBER.search(str(args.get(field, "")))
        if found:
            return int(found.group(1))
    return None


def ask_accounting(now: Snapshot, asks: list[Ask]) -> list[Violation]:
    """The model's counters explained, ask by ask (see the module docstring)."""
    found: list[Violation] = []
    seen: Counter[str] = Counter(a.run for a in asks)
    for run in sorted(set(now.model_calls) | set(seen)):
        if now.model_calls.get(run, 0) != seen[run]:
            found.append(
                Violation(
                    "divergence",
                    run,
                    None,
                    f"the model counted {now.model_calls.get(run, 0)} calls, the runner saw "
                    f"{seen[run]} asks",
                )
            )
    for ask in asks:
        if ask.stale:
            found.append(
                Violation(
                    "zombie_model_call",
                    ask.run,
                    ask.seq,
                    f"model call #{ask.number} was made by {ask.worker} (generation "
                    f"{ask.generation}) while the run was at generation {ask.run_generation}: "
                    "a worker that lost its run bought a model answer",
                )
            )
    by_step: dict[tuple[str, int | None], list[Ask]] = defaultdict(list)
    for ask in asks:
        by_step[ask.run, ask.seq].append(ask)
    for (run, seq), step_asks in sorted(by_step.items(), key=lambda kv: (kv[0][0], kv[0][1] or -1)):
        found += _step_accounting(now, run, seq, step_asks)
    return found


def _step_accounting(now: Snapshot, run: str, seq: int | None, asks: list[Ask]) -> list[Violation]:
    if seq is None:
        outside = "was made outside a decide"
        return [
            Violation("divergence", run, None, f"model call #{a.number} by {a.worker} {outside}")
            for a in asks
        ]
    found: list[Violation] = []
    journaled = [a for a in asks if a.fate == "journaled"]
    decisions = now.decisions.get(run, {})
    decision = decisions.get(seq)
    # the decisions journaled with this one: the other calls of one model answer
    answer = [d for d in decisions.values() if decision and d.llm_call == decision.llm_call]
    if len(journaled) > 1:
        numbers = ", ".join(f"#{a.number} by {a.worker}" for a in journaled)
        found.append(
            Violation(
                "divergence",
                run,
                seq,
                f"decided {len(journaled)} times (model calls {numbers}); a journaled "
                "decision must be replayed, not asked again",
            )
        )
    elif journaled and decision is not None:
        for made in sorted(answer, key=lambda d: d.seq):
            number = name_number(made.args)
            if number is not None and number != journaled[0].number:
                found.append(
                    Violation(
                        "divergence",
                        run,
                        made.seq,
                        f"the journal holds {made.tool}{made.args}, but the answer journaled "
                        f"for step {seq} was model call #{journaled[0].number}",
                    )
                )
    for ask in asks:
        if ask.fate == "lost" and not ask.excused and not ask.stale:
            found.append(
                Violation(
                    "divergence",
                    run,
                    seq,
                    f"model call #{ask.number} (by {ask.worker}) was answered and its "
                    f"answer dropped with nothing in the schedule to explain it "
                    f"({ask.reason})",
                )
            )
    first = decision is not None and min(d.seq for d in answer) == seq
    if decision is not None and first and not journaled:
        found.append(
            Violation(
                "divergence",
                run,
                seq,
                f"the journal holds a decision ({decision.tool}) no worker was seen to journal",
            )
        )
    return found
