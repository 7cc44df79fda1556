"""**claim_owner**: the claim log (``run_claims``) names who holds each generation.

Every claim writes a row with its claimer's token; a worker that adopts a claim made for
it (a supervisor's, ``adopt_lease``) puts its own token on the run and on that row alike.
Between two snapshots, so:

- a claim row's owner changes only to its run's owner now (or the run is free again: its
  adopter stopped since), and only in the run's current generation (an adoption);
- a running run that has an owner is named by the row of its current generation.
"""

from __future__ import annotations

from .observe import Snapshot
from .violations import Violation


def claim_owners(before: Snapshot | None, now: Snapshot) -> list[Violation]:
    found: list[Violation] = []
    was = {(c.run, c.generation): c.owner for c in before.claims} if before else {}
    rows = {(c.run, c.generation): c.owner for c in now.claims}
    for (run, generation), owner in sorted(rows.items()):
        old = was.get((run, generation))
        row = now.runs.get(run)
        if old is None or old == owner or row is None:
            continue
        # the adopter may have stopped since, within the same event (the run is free)
        if generation != row.generation or owner != (row.owner or owner):
            found.append(
                Violation(
                    "claim_owner",
                    run,
                    None,
                    f"generation {generation}'s claim went from {old} to {owner} while the run "
                    f"is at generation {row.generation}, owned by {row.owner}: only an "
                    "adoption renames a claim, its own generation's, to the run's owner",
                )
            )
    for run, row in sorted(now.runs.items()):
        if row.status != "running" or row.owner is None:
            continue
        named = rows.get((run, row.generation))
        if named is not None and named != row.owner:
            found.append(
                Violation(
                    "claim_owner",
                    run,
                    None,
                    f"the run is held by {row.owner} in generation {row.generation}, but the "
                    f"claim log names {named}: an adoption must rename its claim too",
                )
            )
    return found
