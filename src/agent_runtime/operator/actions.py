"""What the operator changes: cancel a run, re-send its stranded intents now, decide a
call in doubt of a run that needs attention, retry it.

``cancel`` needs no lease: the run becomes ``cancelled`` and its worker, if any, stops
at its next journal write, since every one requires ``status = 'running'``, or before its
next attempt of a call with an effect, which it makes only after reading that it still
owns the run. The outcome names the call left in flight, if any (:mod:`.cancelled`).
``resolve`` re-sends every intent without a confirm under its original key through
:meth:`Worker.resolve` (claim, re-send, record, release) and takes no further step; a
run whose lease is live is refused unless its owner provably died on this host or
``takeover`` fences it out. Resolving is acting now: a backoff the run was waiting
out ends first, and the run is left claimable at once.
``retry`` needs no lease either: a failed run goes back to ``pending``, and any free
run that is not final has its backoff ended; either way its attempts and its give-up
clock start again, and the failure it had stays in its history (``run_retries``).
A done or cancelled run is refused, and so is one a live worker holds.
``resolve_call`` needs no lease either (a parked run has no owner): for a run in
``needs_attention`` whose call ``seq`` is an intent without a confirm, one statement records
the operator's choice (confirm with a result, redo, fail; :mod:`.attention`), puts the run
back to ``pending`` and keeps the decision in ``call_resolutions``. ``resolve_run`` on a
parked run refuses, explaining those three choices: re-sending is exactly what a ``once``
call must not do on its own.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from psycopg.types.json import Jsonb

from agent_runtime import config
from agent_runtime.loop.worker import Worker
from agent_runtime.store import db
from agent_runtime.store.records import Run, ToolCall
from agent_runtime.store.runid import check_run_id

from ..crash import NO_CRASH
from ..errors import CallNotFound, ConfigError, RunNotFound, RunUnavailable
from .attention import CHOICES, CallResolution, Choice, PastResolution, failure_result
from .cancelled import Cancellation
from .outcomes import Resolution, Retry
from .snapshot import APPLICATION, read_history
from .views import PastRetry, clock_text, relative

log = logging.getLogger(__name__)


def cancel_run(conn: db.Connection, run_id: str, reason: str | None = None) -> Cancellation:
    """Stop a pending or running run for good; cancelling it twice changes nothing."""
    check_run_id(run_id, source="RUN")
    text = "cancelled by operator" + (f": {reason}" if reason else "")
    row = db.one(conn, "operator_cancel_run", {"run": run_id, "reason": text})
    history = read_history(conn, run_id)  # RunNotFound when there is no such run
    run = history.run
    doubtful = [str(s.key) for s in history.steps if s.state == "in_doubt"]
    left = history.cancelled
    in_flight, decided = (left.in_flight, left.decided) if left is not None else ([], [])
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
            in_flight=in_flight,
            decided=decided,
        )
    log.info(
        "cancelled run=%s previous_status=%s previous_owner=%s generation=%d in_flight=%s",
        run_id,
        row["previous_status"],
        row["previous_owner"],
        row["generation"],
        ",".join(c.key for c in in_flight) or "-",
    )
    return Cancellation(
        run_id=run_id,
        previous_status=row["previous_status"],
        previous_owner=row["previous_owner"],
        generation=row["generation"],
        cancelled_at=row["cancelled_at"],
        already=False,
        left_in_doubt=doubtful,
        in_flight=in_flight,
        decided=decided,
    )


def resolve_run(
    settings: config.Settings, url: str, run_id: str, *, takeover: bool = False
) -> Resolution:
    """Re-send the run's stranded intents under their keys now; take no further step."""
    check_run_id(run_id, source="RUN")
    with db.connection(url, application_name=APPLICATION) as conn:
        db.require_schema(conn)
        before = read_history(conn, run_id)
        if before.attention is not None:
            raise ConfigError(before.attention.one_line())
        stranded = [s.seq for s in before.steps if s.state in ("in_doubt", "redo")]
        if not stranded:
            return Resolution(run_id=run_id, resolved=[], in_doubt=[])
        run = before.run
        if run.status in ("failed", "cancelled"):
            raise RunUnavailable(
                f"run {run_id} is {run.status} ({run.failure or 'no reason recorded'}); "
                f"its {len(stranded)} intent(s) stay in doubt: only a pending or running "
                "run can be claimed to re-send them"
                + (
                    f"; `retry {run_id}` puts it back (its next owner re-sends them), or "
                    f"settle one first: resolve {run_id} --seq {stranded[0]} --confirm JSON | "
                    "--fail"
                    if run.status == "failed"
                    else ""
                )
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
        if run.status == "needs_attention":
            keys = ", ".join(str(s.key) for s in history.steps if s.state == "in_doubt")
            raise RunUnavailable(
                f"run {run_id} needs attention: a call nothing can tell the outcome of is in "
                f"doubt ({keys or 'see show'}); a retry would only park it again. Decide "
                f"the call first: python -m agent_runtime resolve {run_id} --seq N --confirm "
                "JSON | --redo | --fail"
            )
        until = clock_text(run.lease_expires_at, run.now) if run.lease_expires_at else "unknown"
        raise RunUnavailable(
            f"run {run_id} is held by {run.owner} (generation {run.generation}, lease until "
            f"{until}), a worker that is alive as far as its lease says: it needs no retry"
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


def parse_result(text: str) -> Any:
    """The JSON an operator gives as a call's result, or a ConfigError saying what is wrong
    with it (not JSON, ``NaN``, or ``null``, which would read as "no result")."""

    def refuse(constant: str) -> Any:
        raise ValueError(f"{constant} is not JSON")

    example = '{"id": "M-0000001", "status": "delivered"}'
    try:
        value = json.loads(text, parse_constant=refuse)
    except ValueError as exc:
        shown = text if len(text) <= 200 else text[:197] + "..."
        raise ConfigError(
            f"--confirm takes the result of the call as JSON, such as {example}; got: {shown} "
            f"({exc})"
        ) from None
    if value is None:
        raise ConfigError(
            f"--confirm null would record no result; give the result the call had, such as "
            f"{example}, or use --fail"
        )
    return value


def resolve_call(
    conn: db.Connection,
    run_id: str,
    seq: int,
    choice: Choice,
    *,
    result: Any = None,
    reason: str | None = None,
    in_flight_ok: bool = False,
) -> CallResolution:
    """An operator's decision on call ``seq`` of a run that needs attention, or of a failed
    run, in one statement.

    ``confirm``: the call acted, ``result`` is what it returned; ``redo``: it did not, the
    next worker sends it once more; ``fail``: it is given up, the model sees an error naming
    ``reason``. A parked run goes back to pending; a failed run stays failed until
    ``retry``. ``redo`` and ``fail`` are refused while a request of the call may still land
    (before its ``lands_by``), unless ``in_flight_ok``: the caller knows none is under way.
    """
    check_run_id(run_id, source="RUN")
    if choice not in CHOICES:
        raise ConfigError(f"a call is resolved by one of {', '.join(CHOICES)}, got {choice!r}")
    if seq < 0:
        raise ConfigError(f"--seq is a step number, 0 or more; got {seq}")
    if choice == "confirm":
        if result is None:
            raise ConfigError("--confirm needs the call's result, as JSON")
        value: Any = result
    else:
        value = failure_result(reason) if choice == "fail" else None
    row = db.one(
        conn,
        "operator_resolve_call",
        {
            "run": run_id,
            "seq": seq,
            "choice": choice,
            "result": Jsonb(value) if value is not None else None,
            "reason": reason,
            "in_flight_ok": in_flight_ok,
        },
    )
    if row is None:
        raise _refusal(conn, run_id, seq, choice)
    past = PastResolution.from_row(row)
    log.info(
        "resolved-call run=%s seq=%d key=%s choice=%s state=%s reason=%r",
        run_id,
        seq,
        past.idem_key,
        choice,
        row["state"],
        reason or "",
    )
    return CallResolution(run_id=run_id, state=row["state"], past=past, status=row["run_status"])


def _refusal(conn: db.Connection, run_id: str, seq: int, choice: Choice) -> Exception:
    """Why ``operator_resolve_call`` changed nothing, read back after the fact."""
    found = db.one(conn, "get_run", {"run": run_id})
    if found is None:
        return RunNotFound(f"no run with id {run_id!r}")
    run = Run.from_row(found)
    calls = {
        c.seq: c for c in map(ToolCall.from_row, db.run(conn, "load_tool_calls", {"run": run_id}))
    }
    doubt = [c.seq for c in calls.values() if c.state == "intent"]
    doubtful = f"the call in doubt is seq {doubt[0]}" if doubt else "no call of it is in doubt"
    call = calls.get(seq)
    if call is None:
        have = ", ".join(map(str, sorted(calls))) or "none yet"
        return CallNotFound(
            f"run {run_id} has no tool call seq {seq} (its calls: {have}); {doubtful}"
        )
    settled = call.state != "intent"
    how = _settled(call) if settled else "an intent without a confirm"
    if run.status not in ("needs_attention", "failed"):
        return RunUnavailable(
            f"run {run_id} is {run.status}, not needs_attention or failed, and its call seq "
            f"{seq} is {how}: --seq resolves a call of a run parked for an operator (a 'once' "
            "call in doubt) or of a failed run; a pending or running run's worker resolves its "
            "calls by their contracts"
            + (f" (`resolve {run_id}` does it now)" if not settled else "")
        )
    if settled:
        return RunUnavailable(
            f"call seq {seq} of run {run_id} is already resolved ({how}); {doubtful}"
        )
    assert call.lands_by is not None  # the only other refusal: it may still land
    harm = "send it twice" if choice == "redo" else "give up a call that then acts"
    return RunUnavailable(
        f"call seq {seq} of run {run_id} may still land: its last request may act at the "
        f"remote until {clock_text(call.lands_by, run.now)} ({relative(call.lands_by, run.now)})"
        f", so --{choice} now could {harm}; wait until then, or --confirm JSON if you know it "
        "acted"
    )


def _settled(call: ToolCall) -> str:
    if call.state == "redo":
        return "ordered sent again by an operator (redo)"
    by = "by an operator" if call.remote_status == "operator" else f"remote {call.remote_status}"
    return f"{call.state}, {by}"
