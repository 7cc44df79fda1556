"""Taking a run for a worker, or the refusal that says why it cannot be taken.

:func:`claim_run` is what :meth:`agent_runtime.loop.worker.Worker.claim` does: one claim
statement (a free run past its backoff, or an expired lease), and when that takes
nothing, the reason read from the run itself:

==================  ============================================================  ====
the run             what happens                                                  exit
==================  ============================================================  ====
done                nothing (None): there is nothing left to do                   0
failed, cancelled   :class:`RunUnavailable`, with its reason (and ``retry``)      5
needs_attention     :class:`NeedsAttention`: a ``once`` call is in doubt, only    6
                    an operator's ``resolve RUN --seq N ...`` puts it back
backing off         :class:`BackingOff`, with the time it is claimable again      4
a live lease        taken over only from an owner proved dead on this host, or    5
                    with ``takeover`` (fencing stops the old owner); else
                    :class:`RunUnavailable` naming the owner
==================  ============================================================  ====
"""

from __future__ import annotations

import logging

from agent_runtime.errors import BackingOff, NeedsAttention, RunNotFound, RunUnavailable
from agent_runtime.loop.lease import owner_is_dead
from agent_runtime.store.journal import Journal
from agent_runtime.store.records import Lease, Run

log = logging.getLogger(__name__)


def claim_run(
    journal: Journal, run_id: str, owner: str, lease: float, takeover: bool = False
) -> Lease | None:
    """Take ``run_id`` for ``owner`` for ``lease`` seconds, or None if it is done."""
    claimed = journal.claim(run_id, owner, lease)
    if claimed is not None:
        return claimed
    run = journal.get_run(run_id)
    if run is None:
        raise RunNotFound(f"no run with id {run_id!r}")
    if run.status == "done":
        return None
    if run.status in ("failed", "cancelled", "needs_attention"):
        refusal = NeedsAttention if run.status == "needs_attention" else RunUnavailable
        raise refusal(f"run {run_id} is {run.status}: {_why(run)}")
    if run.backing_off:
        raise _backing_off(run)
    dead = run.lease_live and owner_is_dead(run.owner)
    if run.lease_live and (takeover or dead):
        log.info(
            "takeover run=%s previous_owner=%s previous_generation=%d reason=%s",
            run_id,
            run.owner,
            run.generation,
            "owner-process-gone" if dead else "requested",
        )
        claimed = journal.claim(
            run_id,
            owner,
            lease,
            dead_owner=run.owner,
            dead_generation=run.generation,
            forced=not dead,
        )
    if claimed is None:
        raise RunUnavailable(
            f"run {run_id} is held by {run.owner} (generation {run.generation}) "
            f"until {run.lease_expires_at:%H:%M:%S}; the supervisor takes it over "
            "if that worker stops renewing"
        )
    return claimed


def _why(run: Run) -> str:
    reason = run.failure or "no reason recorded"
    if run.status == "failed":
        return f"{reason}; `python -m agent_runtime retry {run.id}` puts it back to pending"
    return reason


def _backing_off(run: Run) -> BackingOff:
    assert run.lease_expires_at is not None
    wait = (run.lease_expires_at - run.now).total_seconds()
    return BackingOff(
        f"run {run.id} is backing off after {run.attempts} attempt(s) until "
        f"{run.lease_expires_at.isoformat(timespec='milliseconds')} ({wait:.1f}s from now; "
        f"last: {run.failure or 'no reason recorded'}); the supervisor resumes it then, "
        f"or `python -m agent_runtime retry {run.id}` ends the wait now"
    )
