"""One run's history as an operator reads it: claims, steps, events, and what is in doubt.

:func:`assemble` judges what :func:`agent_runtime.operator.snapshot.read_history`
read from one consistent snapshot of the journal, against the database clock
``cr_now()`` of that snapshot, the same clock the leases use. What the journal
proves and what it only suggests are kept apart:

- a step is *in doubt* when its intent has no confirm: the request may or may
  not have reached the remote, and only a re-send under the same key can tell;
- a decision is *replayed* when a generation other than the one that decided it
  acted on it (wrote its intent or its confirm): the restart read it back
  instead of asking the model;
- a *takeover* is a claim whose previous owner still held the lease, expired or
  not; the claim's recorded reason says why it could (expired, owner proved dead,
  forced), and the previous worker is shown dead after its last write, or fenced
  out when the takeover was forced. A claim of a run that was handed back is not a
  takeover;
- a *retry* (``run_retries``) keeps what it cleared: a failed run's failure stays on the
  timeline where it happened, followed by the operator's retry;
- a run *needs attention* when a restart found a ``once`` call in doubt and parked it: the
  verdict says that nothing can tell whether the call acted and what each of the operator's
  choices means (:mod:`.attention`); an operator's decision (``call_resolutions``) stays on
  the timeline: where the run was parked, then the decision on the operator's lane;
- a *cancelled* run's journal is exactly what it was at the cancel (its worker's writes are
  all refused from then on), so a call without a confirm was in flight when it was
  cancelled: :mod:`.cancelled` names it and says what to do about it.
"""

from __future__ import annotations

import shlex
from dataclasses import replace

from agent_runtime.store.records import Decision, Run, ToolCall

from .attention import Attention, PastResolution, command
from .cancelled import Cancelled, InFlight
from .events import event_order, events_of, park_event, resolution_events, retry_events
from .views import Claim, PastRetry, RunHistory, Step, clock_text, owner_pid, relative


def assemble(
    run: Run,
    decisions: list[Decision],
    calls: list[ToolCall],
    claims: list[Claim],
    *,
    owner_gone: bool = False,
    retries: list[PastRetry] | None = None,
    resolutions: list[PastResolution] | None = None,
) -> RunHistory:
    """Judge what was read: steps with verdicts, events in order, notes on the run."""
    retries = retries or []
    resolutions = resolutions or []
    by_seq = {c.seq: c for c in calls}
    steps = [_step(d, by_seq.get(d.seq), run, owner_gone) for d in decisions]
    attention = _attention(run, steps)
    owners = {c.generation: c.owner for c in claims}
    if run.owner is not None:
        owners.setdefault(run.generation, run.owner)
    events = events_of(run, steps, claims, owners, owner_gone)
    events += [e for r in retries for e in retry_events(r, run.now)]
    events += [e for r in resolutions for e in resolution_events(r, steps, run.now)]
    if attention is not None:
        events.append(park_event(attention, run.now))
    events.sort(key=event_order)
    in_doubt = [s.verdict for s in steps if s.state == "in_doubt" and s.verdict]
    notes = _run_notes(run, steps, owner_gone, retries, resolutions)
    notes += [s.verdict for s in steps if s.state in ("decided", "redo") and s.verdict]
    return RunHistory(
        run=run,
        claims=claims,
        steps=steps,
        events=events,
        in_doubt=in_doubt,
        notes=notes,
        owner_gone=owner_gone,
        owners=owners,
        retries=retries,
        resolutions=resolutions,
        attention=attention,
        cancelled=_cancelled(run, steps, owners),
    )


def _cancelled(run: Run, steps: list[Step], owners: dict[int, str]) -> Cancelled | None:
    """What the cancel of a cancelled run fenced and left: read off the journal, which no
    write has changed since."""
    if run.status != "cancelled":
        return None
    in_flight = [
        InFlight(
            seq=s.seq,
            key=s.key,
            tool=s.tool,
            effect=s.effect or "keyed",
            state="redo" if s.state == "redo" else "intent",
            args=s.args,
            intent_at=s.intent_at,
            intent_by=s.intent_by,
        )
        for s in steps
        if s.state in ("in_doubt", "redo")
        and s.key is not None
        and s.intent_at is not None
        and s.intent_by is not None
    ]
    return Cancelled(
        cancelled_at=run.updated_at,
        reason=run.failure,
        generation=run.generation,
        owner=owners.get(run.generation),
        in_flight=in_flight,
        decided=[(s.seq, s.tool) for s in steps if s.state == "decided"],
    )


def _attention(run: Run, steps: list[Step]) -> Attention | None:
    """The call in doubt of a parked run (the first, if a journal ever held several)."""
    if run.status != "needs_attention":
        return None
    step = next((s for s in steps if s.state == "in_doubt"), None)
    if step is None or step.key is None:
        return None
    return Attention(
        run_id=run.id,
        seq=step.seq,
        key=step.key,
        tool=step.tool,
        effect=step.effect or "keyed",
        args=step.args,
        reason=run.failure,
        parked_at=run.updated_at,
        parked_by=run.generation,
    )


def _step(decision: Decision, call: ToolCall | None, run: Run, owner_gone: bool) -> Step:
    step = Step(
        seq=decision.seq,
        tool=decision.tool,
        args=decision.args,
        llm_call=decision.llm_call,
        decided_at=decision.decided_at,
        decided_by=decision.generation,
    )
    if call is not None:
        step = replace(
            step,
            key=call.idem_key,
            intent_at=call.intent_at,
            intent_by=call.generation,
            confirmed_at=call.confirmed_at,
            confirmed_by=call.confirm_generation,
            result=call.result,
            remote_status=call.remote_status,
            effect=call.effect,
            call_state=call.state,
        )
    verdict = None
    if step.state == "in_doubt":
        verdict = _doubt_verdict(step, run, owner_gone)
    elif step.state == "decided":
        verdict = _decided_verdict(step, run)
    elif step.state == "redo":
        verdict = _redo_verdict(step, run)
    return replace(step, verdict=verdict)


def _will(step: Step) -> str:
    """What the next owner does with the call in doubt, by its contract."""
    key = step.key
    if step.effect == "checked":
        return f"check under {key} whether it acted, and send it only if not"
    if step.effect == "read":
        return f"call it again under {key} (a read has no effect)"
    if step.effect == "once":
        return (
            f"not send it again ({step.tool} is 'once': nothing can tell whether {key} acted); "
            "it parks the run for an operator"
        )
    return f"re-send under {key}"


def _does(step: Step) -> str:
    """:func:`_will`, said of a worker doing it now."""
    key = step.key
    if step.effect == "checked":
        return f"checks under {key} whether it acted, and sends it only if not,"
    if step.effect == "read":
        return f"calls it again under {key} (a read has no effect)"
    if step.effect == "once":
        return f"does not send it again ({step.tool} is 'once'): it parks the run for an operator"
    return f"re-sends under {key}"


def _redo_verdict(step: Step, run: Run) -> str:
    head = f"seq {step.seq}: an operator ordered it sent again (redo)"
    if run.status in ("done", "failed", "cancelled"):
        return f"{head}; the run is {run.status}, so it will never be sent"
    return (
        f"{head}; the next worker makes it an intent anew and sends it once more under "
        f"{step.key}; a crash after that send leaves it in doubt again, never sent twice "
        "on its own"
    )


def _doubt_verdict(step: Step, run: Run, owner_gone: bool) -> str:
    assert step.intent_at is not None
    head = f"seq {step.seq}: intent written {clock_text(step.intent_at, run.now)}, no confirm"
    key = step.key
    if run.status == "failed":
        return (
            f"{head}; the run is failed: nothing sends under {key} until a `retry {run.id}`, "
            f"whose next owner will {_will(step)}. To settle it yourself first (if it is why "
            f"the run failed): `{command(run.id, step.seq, 'confirm')}` (it acted) or `--fail` "
            "(give it up; the model sees the failure), then retry"
        )
    if run.status in ("done", "cancelled"):
        return (
            f"{head}; the run is {run.status}, so nothing will re-send under {key}: the remote "
            "may hold a result for it that the journal never recorded"
        )
    if run.status == "needs_attention":
        return (
            f"{head}; {step.tool} is '{step.effect}': nothing can tell whether it acted, so no "
            f"worker sends it again on its own and the run needs attention. An operator "
            f"decides: `{command(run.id, step.seq, 'confirm')}` (it acted), `--redo` (it did "
            "not: send it once more) or `--fail` (give it up; the model sees the failure)"
        )
    will, does = _will(step), _does(step)
    expires = run.lease_expires_at
    if run.owner is None or expires is None:
        when = (
            f" from {clock_text(expires, run.now)}"
            if expires is not None and expires > run.now
            else ""
        )
        return f"{head}; no worker holds the run; the next owner{when} will {will}"
    if expires <= run.now:
        return (
            f"{head}; the worker's lease expired {clock_text(expires, run.now)}; "
            f"the next owner will {will}"
        )
    if owner_gone:
        return (
            f"{head}; its worker (generation {run.generation}, pid {owner_pid(run.owner)}) is "
            f"gone though its lease runs until {clock_text(expires, run.now)}; `resolve "
            f"{run.id}` {does} now, as does the next `run`"
        )
    if step.intent_by == run.generation:
        return (
            f"{head} yet; its worker (generation {run.generation}) holds the lease until "
            f"{clock_text(expires, run.now)} and may be waiting for the remote; if it dies, "
            f"the next owner will {will}"
        )
    return (
        f"{head}; the current worker (generation {run.generation}, lease until "
        f"{clock_text(expires, run.now)}) {does} before anything else"
    )


def _decided_verdict(step: Step, run: Run) -> str:
    head = (
        f"seq {step.seq}: decided {clock_text(step.decided_at, run.now)} ({step.tool}), no intent"
    )
    if run.status in ("done", "failed", "cancelled"):
        return f"{head}; the run is {run.status}, so it will never be called"
    return f"{head}: nothing was sent; the next owner replays the decision, no model call"


def _run_notes(
    run: Run,
    steps: list[Step],
    owner_gone: bool,
    retries: list[PastRetry],
    resolutions: list[PastResolution],
) -> list[str]:
    now = run.now
    confirmed = sum(1 for s in steps if s.state == "confirmed")
    when = clock_text(run.updated_at, now)
    if run.status == "needs_attention":
        return [
            f"needs attention since {when}: {run.failure or 'no reason recorded'}; no worker, "
            "supervisor or give-up takes the run until an operator resolves the call in doubt"
        ]
    last = resolutions[-1] if resolutions else None
    if (
        run.status == "pending"
        and last is not None
        and (not retries or retries[-1].retried_at < last.resolved_at)
    ):
        return [
            f"put back to pending by an operator at {clock_text(last.resolved_at, now)} "
            f"(seq {last.seq}: {last.outcome}); {_waits(run)}"
        ]
    if run.status == "done":
        return [f"done at {when}: {confirmed} steps confirmed, llm_calls {run.llm_calls}"]
    if run.status == "failed":
        return [
            f"failed at {when}: {run.failure or 'no reason recorded'}; `retry {run.id}` puts "
            "it back to pending"
        ]
    if run.status == "cancelled":
        return [f"cancelled at {when}: {run.failure or 'no reason recorded'}"]
    if run.status == "pending":
        if retries and retries[-1].previous_status == "failed":
            at = clock_text(retries[-1].retried_at, now)
            return [f"put back to pending by an operator's retry at {at}; {_waits(run)}"]
        return [f"never claimed; {_waits(run)}"]
    expires = run.lease_expires_at
    if run.owner is None or expires is None:
        why = f" ({run.failure})" if run.failure else ""
        if run.backing_off:
            assert expires is not None
            return [
                f"no worker holds the run{why}; backing off after {run.attempts} attempt(s): "
                f"claimable from {clock_text(expires, now)} ({relative(expires, now)}); "
                f"`retry {run.id}` ends the wait now"
            ]
        return [f"no worker holds the run{why}; claimable now; {_waits(run)}"]
    owner = f"generation {run.generation} ({run.owner})"
    if expires <= now:
        return [
            f"{owner} stopped renewing: its lease expired {clock_text(expires, now)} "
            f"({relative(expires, now)}); presumed dead, a supervisor of agent {run.agent!r} "
            "hands the run on"
        ]
    if owner_gone:
        return [
            f"{owner} is gone: pid {owner_pid(run.owner)} no longer exists on this host, though "
            f"the lease runs until {clock_text(expires, now)}; `resolve` or `run` take over now"
        ]
    return [f"{owner} holds the lease until {clock_text(expires, now)} ({relative(expires, now)})"]


def _waits(run: Run) -> str:
    """Whom a claimable run waits for, and how long it has. Which supervisors run, and with
    which agents, is recorded nowhere: the wait is what tells that none serves the agent."""
    since = run.lease_expires_at or run.updated_at
    return (
        f"waiting {relative(since, run.now).removesuffix(' ago')} for a worker of agent "
        f"{run.agent!r}: only a supervisor started with an --agent named {run.agent!r}, or "
        f"`python -m agent_runtime run --agent MODULE:ATTR --run-id {shlex.quote(run.id)}`, "
        "takes it"
    )
