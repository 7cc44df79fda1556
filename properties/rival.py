"""A rival's plain start of a held run, and the check that it is refused.

**rival** (at every restart, in-process runner): just before a restart takes a run over,
the runner asks for the run as a second plain start would (``claim_run`` without
``takeover``, as ``python -m agent_runtime run R`` does) whenever a live worker holds an
unexpired lease on it: the claim must be refused (``RunUnavailable``) and take nothing. A
live lease is taken only on a takeover or from an owner proved dead. Without it
``claim_run``'s ``lease_live and (takeover or dead)`` made ``or`` passed the suite: every
claim of a held run in a schedule was a restart's takeover (seed-43 sample,
docs/mutation-report-2026-12-04-seed43.md).
"""

from __future__ import annotations

from typing import Final

from agent_runtime.errors import RunUnavailable
from agent_runtime.loop import claiming
from agent_runtime.loop.lease import owner_is_dead
from agent_runtime.store import db
from agent_runtime.store.journal import Journal

from .violations import Violation

RIVAL: Final = "rival:0:plain-start"  # a token no worker has (no host, no live pid)


def rival_refused(conn: db.Connection, run: str, live_owners: set[str]) -> list[Violation]:
    """**rival**: a plain claim of ``run`` while one of ``live_owners`` holds its live
    lease (see the module's doc)."""
    journal = Journal(conn)
    held = journal.get_run(run)
    if held is None or not held.lease_live or held.owner not in live_owners:
        return []
    if owner_is_dead(held.owner):
        return []  # a dead owner's lease is taken by any claim, rightly
    try:
        taken = claiming.claim_run(journal, run, RIVAL, 30.0, takeover=False)
    except RunUnavailable:
        return []
    return [
        Violation(
            "rival",
            run,
            None,
            f"a plain start (no takeover) of the run held by the live {held.owner} "
            f"(generation {held.generation}) got {taken}",
        )
    ]
