"""**progress**: a run's attempts and its progress, as the journal keeps them.

``runs.attempts`` counts the claims since the run last made progress and ``progress_at``
says when that was; the sweep gives a run up by both (``give_up_exhausted``). A worker's
confirm is progress: it writes ``attempts = 0`` and ``progress_at`` for its own run, in the
same statement (``record_confirm``); a refused call (journaled with the model's answer,
never sent) is none. Between two snapshots, so:

- a run that got a worker's confirm, and no claim since, has ``attempts`` 0;
- a run's attempts go down, or its ``progress_at`` moves, only by its own progress: a
  confirm of its own, its finish, or an operator's hand (a retry starts them again).

A database crash may take a relaxed confirm back, its progress with it: the second rule
is not judged across one (the shadow judges what a crash may take).
"""

from __future__ import annotations

from .observe import Snapshot
from .violations import Violation


def attempts_truth(
    before: Snapshot | None, now: Snapshot, *, crashed: bool, operated: set[str]
) -> list[Violation]:
    found: list[Violation] = []
    if before is None:
        return found
    for run, new in now.runs.items():
        old = before.runs.get(run)
        if old is None:
            continue
        was = before.calls.get(run, {})
        confirmed = [
            c
            for seq, c in now.calls.get(run, {}).items()
            if c.state != "intent" and c.state != "redo" and c.confirm_generation is not None
            and c.remote_status != "rejected"  # a refused call: journaled, never sent
            and (seq not in was or was[seq].confirm_generation != c.confirm_generation)
        ]  # fmt: skip
        mine = [c for c in confirmed if c.confirm_generation == new.generation]
        if mine and new.generation == old.generation and new.attempts != 0:
            found.append(
                Violation(
                    "progress",
                    run,
                    mine[-1].seq,
                    f"generation {new.generation} confirmed step {mine[-1].seq}, yet the run's "
                    f"attempts are {new.attempts}: a confirm is progress (attempts 0)",
                )
            )
        moved = new.attempts < old.attempts or new.progress_at != old.progress_at
        own = confirmed or new.status == "done" or run in operated
        if moved and not own and not crashed:
            found.append(
                Violation(
                    "progress",
                    run,
                    None,
                    f"its attempts went from {old.attempts} to {new.attempts} and its progress "
                    f"from {old.progress_at} to {new.progress_at}, yet it confirmed nothing, "
                    "did not finish and no operator touched it: only its own progress may",
                )
            )
    return found
