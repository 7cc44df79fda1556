"""What the operator changes: cancel a run, re-send its stranded intents now, retry it.

``cancel`` needs no lease: the run becomes ``cancelled`` and its worker, if any, stops
at its next journal write, since every one requires ``status = 'running'``.
``resolve`` re-sends every intent without a confirm under its original key through
:meth:`Worker.resolve` (claim, re-send, record, release) and takes no further step; a
run whose lease is live is refused unless its owner provably died on this host or
``takeover`` fences it out. Resolving is acting now: a backoff the run was waiting
out ends first, and the run is left claimable at once.
``retry`` needs no lease either: a failed run goes back to ``pending``, and any free
run that is not final has its backoff ended; either way its attempts and its give-up
clock start again, and the failure it had stays in its history (``run_retries``).
A done or cancelled run is refused, and so is one a live worker holds.
"""

from __future__ import annotations

import logging

from .. import config, db
from ..crash import NO_CRASH
from ..errors import RunUnavailable
from ..runid import check_run_id
from ..worker import Worker
from .snapshot import APPLICATION, read_history
from .views import Cancellation, PastRetry, Resolution, Retry, clock_text

log = logging.getLogger(__name__)


def cancel_run(conn: db.Connection, run_id: str, reason: str | None = None) -> Cancellation:
    """Stop a pending or running run for good; cancelling it twice changes nothing."""
    check_run_id(run_id, source="RUN")
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
    check_run_id(run_id, source="RUN")
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
        db.run(conn, "operator_end_backoff", {"run": run_id})
        worker = Worker.open(settings.with_changes(crash=NO_CRASH), url, heartbeat=False)
        try:
            worker.resolve(run_id, takeover=takeover)
        finally:
            worker.close()
        after = read_history(conn, run_id)
    resolved = [s for s in after.steps if s.seq in stranded]
    return Resolution(run_id=run_id, resolved=resolved, in_doubt=after.in_doubt)


def retry_run(conn: db.Connection, run_id: str) -> Retry:
    """Give a failed run (or a free one waiting out a backoff) a fresh start now."""
    check_run_id(run_id, source="RUN")
    row = db.one(conn, "operator_retry_run", {"run": run_id})
    history = read_history(conn, run_id)  # RunNotFound when there is no such run
    run = history.run
    if row is None:
        if run.status == "done":
            raise RunUnavailable(f"run {run_id} is done: there is nothing to retry")
        if run.status == "cancelled":
            raise RunUnavailable(
                f"run {run_id} is cancelled ({run.failure or 'no reason recorded'}): a "
                "cancelled run stays cancelled; only a failed run, or one waiting out a "
                "backoff, can be retried"
            )
        assert run.lease_expires_at is not None
        raise RunUnavailable(
            f"run {run_id} is held by {run.owner} (generation {run.generation}, lease until "
            f"{clock_text(run.lease_expires_at, run.now)}), a worker that is alive as far as "
            "its lease says: it needs no retry"
        )
    past = PastRetry.from_row(row)
    log.info(
        "retried run=%s previous_status=%s previous_attempts=%d status=%s",
        run_id,
        past.previous_status,
        past.previous_attempts,
        row["status"],
    )
    doubtful = [str(s.key) for s in history.steps if s.state == "in_doubt"]
    return Retry(run_id=run_id, status=row["status"], past=past, in_doubt=doubtful)
