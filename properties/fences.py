"""What an operator's cancel or retry fences, as the snapshot right after it saw the run,
and what the journal may not show afterwards (``cancel_fence``, ``operator_fence``).

A cancel ends the run for good; a retry of a run whose worker's lease lapsed clears the
owner and keeps the generation (DESIGN.md section 9): until the next claim, nobody may
write anything of the run, and a worker of that generation that wakes (hung, stalled) is
refused at its first write. A database crash may take back what was not durable, so a
confirm that became an intent again, or a send count that went down, is no write.
"""

from __future__ import annotations

from dataclasses import dataclass

from .observe import CallRow, DecisionRow, Snapshot
from .violations import Violation


@dataclass(frozen=True, kw_only=True)
class Fence:
    """A run as the snapshot right after an operator's cancel or retry saw it."""

    generation: int
    decisions: dict[int, DecisionRow]
    calls: dict[int, CallRow]
    model_calls: int
    answered: dict[str, int]  # by remote, the last answer logged before the operator acted


def fence_of(now: Snapshot, run: str) -> Fence:
    answered: dict[str, int] = {}
    for a in now.answers:
        answered[a.remote] = max(answered.get(a.remote, 0), a.seq)
    return Fence(
        generation=now.runs[run].generation,
        decisions=dict(now.decisions.get(run, {})),
        calls=dict(now.calls.get(run, {})),
        model_calls=now.model_calls.get(run, 0),
        answered=answered,
    )


def journal_written(run: str, fence: Fence, now: Snapshot) -> list[str]:
    """The run's decisions and calls written since ``fence`` was taken, said briefly."""
    said: list[str] = []
    for seq, d in now.decisions.get(run, {}).items():
        if fence.decisions.get(seq) != d:
            said.append(f"decision seq={seq} ({d.tool}) was written")
    for seq, c in now.calls.get(run, {}).items():
        old = fence.calls.get(seq)
        if old is None:
            said.append(f"{c.key} became {c.state}")
            continue
        reverted = old.state == "confirmed" and c.state == "intent"
        if old.state != c.state and not reverted:
            said.append(f"{c.key} became {c.state}")
        elif c.sends > old.sends:
            said.append(f"{c.key} was sent again ({old.sends} -> {c.sends} sends)")
    return said


def retry_fence(run: str, fence: Fence, now: Snapshot) -> Violation | None:
    """Until the run is claimed again, nothing of it is written after a retry (no decision,
    intent, send or confirm, no finish, failure or park, no owner), nor the model asked."""
    row = now.runs.get(run)
    if row is None or row.generation != fence.generation:
        return None  # claimed since: a write of the fenced generation is a stale write now
    said = journal_written(run, fence, now)
    if now.model_calls.get(run, 0) > fence.model_calls:
        said.append(f"the model was asked ({now.model_calls[run]} calls)")
    if row.status in ("done", "failed", "needs_attention"):
        said.append(f"it is {row.status} (failure {row.failure!r})")
    if row.owner is not None:
        said.append(f"{row.owner} owns it")
    if not said:
        return None
    return Violation(
        "operator_fence",
        run,
        None,
        f"an operator retried the run under its worker of generation {fence.generation} "
        "(the owner cleared), yet before any claim "
        + "; ".join(said)
        + ": a worker whose run an operator took writes nothing more",
    )
