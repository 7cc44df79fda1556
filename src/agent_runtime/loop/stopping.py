"""How work under a lease ends when it does not finish: fenced, or stopped with a reason.

A worker drives a run inside :func:`holding`. Three endings are possible besides done:

- **fenced** (``LeaseLost``): another owner or an operator's cancel took the run; nothing
  of it is ours to record, so the log says who holds it now and the error goes on;
- **a known error** (an ``AgentRuntimeError`` not yet recorded on the run): a permanent one
  fails the run; any other releases it with its reason and a backoff, the ``n``-th claim
  since the last progress waiting ``backoff.delay(n)`` (and, for a call that may still land
  at its remote, at least until it no longer can);
- **a bug** (any other exception): recorded the same way as ``UnexpectedError`` and said
  once, with its traceback.

Each ending is one ERROR or WARNING line; the reason is written on the run, so the operator
view and the next worker see why.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

from agent_runtime.backoff import Backoff
from agent_runtime.errors import AgentRuntimeError, CallInFlight, LeaseLost, UnexpectedError
from agent_runtime.observe import metrics
from agent_runtime.store.journal import Journal
from agent_runtime.store.records import Lease

log = logging.getLogger(__name__)


@contextmanager
def holding(journal: Journal, lease: Lease, backoff: Backoff) -> Iterator[None]:
    """Run the body under ``lease``; record on the run how it ended if it did not finish."""
    try:
        yield
    except LeaseLost as exc:
        metrics.count_fenced()
        log.warning(
            "fenced run=%s generation=%d reason=%r", lease.run_id, lease.generation, str(exc)
        )
        explain_fencing(journal, lease)
        raise
    except AgentRuntimeError as exc:
        if not exc.recorded_on_run:
            stop_on_error(journal, lease, backoff, exc)
        raise
    except Exception as exc:  # a bug: keep the reason, say it once with its traceback
        wrapped = UnexpectedError(f"{type(exc).__name__}: {exc}")
        stop_on_error(journal, lease, backoff, wrapped, cause=exc)
        raise wrapped from exc


def explain_fencing(journal: Journal, lease: Lease) -> None:
    """Say who holds the run now: another owner, or an operator's cancel."""
    try:
        run = journal.get_run(lease.run_id)
    except AgentRuntimeError:
        return
    if run is not None:
        log.warning(
            "lost-run run=%s mine=%d now_generation=%d now_status=%s now_owner=%s",
            lease.run_id,
            lease.generation,
            run.generation,
            run.status,
            run.owner,
        )


def stop_on_error(
    journal: Journal,
    lease: Lease,
    backoff: Backoff,
    exc: AgentRuntimeError,
    *,
    cause: BaseException | None = None,
) -> None:
    """Record why the run stopped, and say it in the one ERROR line of this failure
    (with ``cause``'s traceback: an exception the runtime did not expect)."""
    reason = f"{type(exc).__name__}: {exc}"
    run_id = lease.run_id
    try:
        if exc.permanent:
            journal.fail(lease, reason)
            log.error("failed run=%s reason=%r", run_id, reason, exc_info=cause)
        else:
            delay = backoff.delay(journal.require_run(run_id).attempts)
            if isinstance(exc, CallInFlight):  # not before the call can no longer land
                delay = max(delay, exc.retry_after)
            journal.release(lease, reason, delay)
            log.error("stopped run=%s resumable=yes reason=%r", run_id, reason, exc_info=cause)
    except AgentRuntimeError as inner:
        log.error(
            "stopped run=%s reason=%r unrecorded=%r", run_id, reason, str(inner), exc_info=cause
        )
    exc.reported = True
