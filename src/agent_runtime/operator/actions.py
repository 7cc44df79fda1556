"""What the operator changes: cancel a run, or re-send its stranded intents now.

``cancel`` is the one write that needs no lease: the run becomes ``cancelled`` and
its worker, if any, stops at its next journal write, since every one requires
``status = 'running'``. ``resolve`` re-sends every intent without a confirm under
its original key through :meth:`Worker.resolve` (claim, re-send, record, release)
and takes no further step; a run whose lease is live is refused unless its owner
provably died on this host or ``takeover`` fences it out.
"""

from __future__ import annotations

import logging

from .. import config, db
from ..crash import NO_CRASH
from ..errors import RunUnavailable
from ..worker import Worker
from .snapshot import APPLICATION, read_history
from .views import Cancellation, Resolution, clock_text

log = logging.getLogger(__name__)


def cancel_run(conn: db.Connection, run_id: str, reason: str | None = None) -> Cancellation:
    """Stop a pending or running run for good; cancelling it twice changes nothing."""
    text = "cancelled by operator" + (f": {reason}" if reason else "")
    row = db.one(conn, "operator_cancel_run", {"run": run_id, "reason": text})
    history = read_history(conn, run_id)  # RunNotFound when there is no such run
    run = history.run
    doubtful = [str(s.key) for s in history.steps if s.state == "in_doubt"]
    if row is None:
        if run.status != "cancelled":
            raise RunUnavailable(
                f"run {run_id} is {run.status}; only a pending or running run can be cancelled"
            )
        return Cancellation(
            run_id=run_id,
            previous_status="cancelled",
            previous_owner=None,
            generation=run.generation,
            cancelled_at=run.updated_at,
            already=True,
            left_in_doubt=doubtful,
        )
    log.info(
        "cancelled run=%s previous_status=%s previous_owner=%s generation=%d",
        run_id,
        row["previous_status"],
        row["previous_owner"],
        row["generation"],
    )
    return Cancellation(
        run_id=run_id,
        previous_status=row["previous_status"],
        previous_owner=row["previous_owner"],
        generation=row["generation"],
        cancelled_at=row["cancelled_at"],
        already=False,
        left_in_doubt=doubtful,
    )


def resolve_run(
    settings: config.Settings, url: str, run_id: str, *, takeover: bool = False
) -> Resolution:
    """Re-send the run's stranded intents under their keys now; take no further step."""
    with db.connection(url, application_name=APPLICATION) as conn:
        db.require_schema(conn)
        before = read_history(conn, run_id)
        stranded = [s.seq for s in before.steps if s.state == "in_doubt"]
        if not stranded:
            return Resolution(run_id=run_id, resolved=[], in_doubt=[])
        run = before.run
        if run.status in ("failed", "cancelled"):
            raise RunUnavailable(
                f"run {run_id} is {run.status} ({run.failure or 'no reason recorded'}); "
                f"its {len(stranded)} intent(s) stay in doubt: only a pending or running "
                "run can be claimed to re-send them"
            )
        if run.lease_live and not before.owner_gone and not takeover:
            assert run.lease_expires_at is not None
            raise RunUnavailable(
                f"run {run_id} is held by {run.owner} (generation {run.generation}, lease "
                f"until {clock_text(run.lease_expires_at, run.now)}), a worker that is alive as "
                "far as this host can tell; it re-sends its own intents. To fence it out and "
                f"resolve now anyway: resolve {run_id} --takeover"
            )
        worker = Worker.open(settings.with_changes(crash=NO_CRASH), url, heartbeat=False)
        try:
            worker.resolve(run_id, takeover=takeover)
        finally:
            worker.close()
        after = read_history(conn, run_id)
    resolved = [s for s in after.steps if s.seq in stranded]
    return Resolution(run_id=run_id, resolved=resolved, in_doubt=after.in_doubt)
