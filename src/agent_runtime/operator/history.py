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
  timeline where it happened, followed by the operator's retry.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime

from ..conversation import DONE
from ..records import Decision, Run, ToolCall
from .views import Claim, Event, PastRetry, RunHistory, Step, clock_text, owner_pid, relative

# Order of events that share a timestamp (they never should; cr_now() is clock_timestamp()).
_RANK = {
    "claim": 0,
    "takeover": 0,
    "decide": 1,
    "intent": 2,
    "confirm": 3,
    "crash": 4,
    "fenced": 4,
    "stopped": 4,
    "expired": 5,
    "done": 6,
    "failed": 6,
    "cancelled": 6,
    "retried": 7,
}


def assemble(
    run: Run,
    decisions: list[Decision],
    calls: list[ToolCall],
    claims: list[Claim],
    *,
    owner_gone: bool = False,
    retries: list[PastRetry] | None = None,
) -> RunHistory:
    """Judge what was read: steps with verdicts, events in order, notes on the run."""
    retries = retries or []
    by_seq = {c.seq: c for c in calls}
    steps = [_step(d, by_seq.get(d.seq), run, owner_gone) for d in decisions]
    owners = {c.generation: c.owner for c in claims}
    if run.owner is not None:
        owners.setdefault(run.generation, run.owner)
    events = _events(run, steps, claims, owners, owner_gone)
    events += [e for r in retries for e in _retry_events(r, run.now)]
    events.sort(key=lambda e: (e.at, _RANK.get(e.kind, 9), -1 if e.seq is None else e.seq))
    in_doubt = [s.verdict for s in steps if s.state == "in_doubt" and s.verdict]
    notes = _run_notes(run, steps, owner_gone, retries)
    notes += [s.verdict for s in steps if s.state == "decided" and s.verdict]
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
        )
    verdict = None
    if step.state == "in_doubt":
        verdict = _doubt_verdict(step, run, owner_gone)
    elif step.state == "decided":
        verdict = _decided_verdict(step, run)
    return replace(step, verdict=verdict)


def _doubt_verdict(step: Step, run: Run, owner_gone: bool) -> str:
    assert step.intent_at is not None
    head = f"seq {step.seq}: intent written {clock_text(step.intent_at, run.now)}, no confirm"
    key = step.key
    if run.status in ("done", "failed", "cancelled"):
        return (
            f"{head}; the run is {run.status}, so nothing will re-send under {key}: the remote "
            "may hold a result for it that the journal never recorded"
        )
    expires = run.lease_expires_at
    if run.owner is None or expires is None:
        when = (
            f" from {clock_text(expires, run.now)}"
            if expires is not None and expires > run.now
            else ""
        )
        return f"{head}; no worker holds the run; the next owner{when} will re-send under {key}"
    if expires <= run.now:
        return (
            f"{head}; the worker's lease expired {clock_text(expires, run.now)}; "
            f"the next owner will re-send under {key}"
        )
    if owner_gone:
        return (
            f"{head}; its worker (generation {run.generation}, pid {owner_pid(run.owner)}) is "
            f"gone though its lease runs until {clock_text(expires, run.now)}; `resolve "
            f"{run.id}` re-sends under {key} now, as does the next `run`"
        )
    if step.intent_by == run.generation:
        return (
            f"{head} yet; its worker (generation {run.generation}) holds the lease until "
            f"{clock_text(expires, run.now)} and may be waiting for the remote; if it dies, "
            f"the next owner will re-send under {key}"
        )
    return (
        f"{head}; the current worker (generation {run.generation}, lease until "
        f"{clock_text(expires, run.now)}) re-sends under {key} before anything else"
    )


def _decided_verdict(step: Step, run: Run) -> str:
    head = (
        f"seq {step.seq}: decided {clock_text(step.decided_at, run.now)} ({step.tool}), no intent"
    )
    if run.status in ("done", "failed", "cancelled"):
        return f"{head}; the run is {run.status}, so it will never be called"
    return f"{head}: nothing was sent; the next owner replays the decision, no model call"


def _run_notes(
    run: Run, steps: list[Step], owner_gone: bool, retries: list[PastRetry]
) -> list[str]:
    now = run.now
    confirmed = sum(1 for s in steps if s.state == "confirmed")
    when = clock_text(run.updated_at, now)
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
            return [
                f"put back to pending by an operator's retry at {at}: the supervisor, or "
                "`python -m agent_runtime run`, starts it"
            ]
        return ["never claimed: the supervisor, or `python -m agent_runtime run`, starts it"]
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
        return [f"no worker holds the run{why}; claimable now"]
    owner = f"generation {run.generation} ({run.owner})"
    if expires <= now:
        return [
            f"{owner} stopped renewing: its lease expired {clock_text(expires, now)} "
            f"({relative(expires, now)}); presumed dead, the supervisor hands the run on"
        ]
    if owner_gone:
        return [
            f"{owner} is gone: pid {owner_pid(run.owner)} no longer exists on this host, though "
            f"the lease runs until {clock_text(expires, now)}; `resolve` or `run` take over now"
        ]
    return [f"{owner} holds the lease until {clock_text(expires, now)} ({relative(expires, now)})"]


def _events(
    run: Run,
    steps: list[Step],
    claims: list[Claim],
    owners: dict[int, str],
    owner_gone: bool,
) -> list[Event]:
    now = run.now
    events: list[Event] = []
    for step in steps:
        events += _step_events(step, now)
    last_write: dict[int, datetime] = {}
    for claim in claims:
        last_write[claim.generation] = claim.claimed_at
    for event in events:
        if event.generation is not None:
            last_write[event.generation] = max(event.at, last_write.get(event.generation, event.at))
    for claim in claims:
        events.append(_claim_event(claim, now))
        if claim.takeover:
            events.append(_death_event(claim, last_write, now))
        elif claim.kind == "free" and claim.generation - 1 in last_write:
            events.append(_stop_event(claim, last_write, now))
    expires = run.lease_expires_at
    if run.status == "running" and run.owner is not None and expires is not None:
        gen = run.generation
        if expires <= now:
            events.append(
                Event(
                    at=expires,
                    kind="expired",
                    generation=gen,
                    text=f"generation {gen}'s lease expired {clock_text(expires, now)} "
                    "without renewal: its worker is presumed dead",
                    label="lease expired",
                    details=("presumed dead", clock_text(expires)),
                )
            )
        elif owner_gone:
            at = last_write.get(gen, run.updated_at)
            events.append(
                Event(
                    at=at,
                    kind="crash",
                    generation=gen,
                    text=f"generation {gen} ({run.owner}) died after {clock_text(at, now)}: "
                    f"pid {owner_pid(run.owner)} is gone, its lease still runs until "
                    f"{clock_text(expires, now)}",
                    label="died",
                    details=(f"pid {owner_pid(run.owner)} gone", f"after {clock_text(at)}"),
                )
            )
    if run.status in ("done", "failed", "cancelled"):
        events.append(
            Event(
                at=run.updated_at,
                kind=run.status,
                generation=None if run.status == "cancelled" else run.generation,
                text=f"run {run.status} at {clock_text(run.updated_at, now)}"
                + (f": {run.failure}" if run.failure and run.status != "done" else ""),
                label=run.status,
                details=(clock_text(run.updated_at),),
            )
        )
    events.sort(key=lambda e: (e.at, _RANK.get(e.kind, 9), -1 if e.seq is None else e.seq))
    return events


def _retry_events(retry: PastRetry, now: datetime) -> list[Event]:
    """A failure the retry cleared (where it happened), then the operator's retry."""
    reason = retry.previous_failure or "no reason recorded"
    events = []
    if retry.previous_status == "failed":
        events.append(
            Event(
                at=retry.previous_since,
                kind="failed",
                generation=retry.generation,
                text=f"run failed at {clock_text(retry.previous_since, now)}: {reason}",
                label="failed",
                details=(clock_text(retry.previous_since),),
            )
        )
    was = "failed" if retry.previous_status == "failed" else f"{retry.previous_status}, free"
    events.append(
        Event(
            at=retry.retried_at,
            kind="retried",
            generation=None,
            text=f"retried by an operator at {clock_text(retry.retried_at, now)}: the run was "
            f"{was} after {retry.previous_attempts} attempt(s) ({reason}); attempts, backoff "
            "and give-up clock start again",
            label="retried",
            details=(f"was {retry.previous_status}", clock_text(retry.retried_at)),
        )
    )
    return events


def _step_events(step: Step, now: datetime) -> list[Event]:
    seq = step.seq
    tool = "done (nothing left to do)" if step.tool == DONE else step.tool
    events = [
        Event(
            at=step.decided_at,
            kind="decide",
            generation=step.decided_by,
            seq=seq,
            text=f"seq {seq} decided by generation {step.decided_by}: {tool} "
            f"(llm call {step.llm_call})",
            label=f"decide {seq}",
            details=(step.tool, clock_text(step.decided_at)),
        )
    ]
    if step.intent_at is not None and step.intent_by is not None:
        replay = (
            f", replaying generation {step.decided_by}'s decision"
            if step.intent_by != step.decided_by
            else ""
        )
        events.append(
            Event(
                at=step.intent_at,
                kind="intent",
                generation=step.intent_by,
                seq=seq,
                key=step.key,
                text=f"seq {seq} intent written by generation {step.intent_by} under "
                f"{step.key}{replay}",
                label=f"intent {seq}" if step.state != "in_doubt" else f"intent {seq} ?",
                details=(str(step.key), clock_text(step.intent_at)),
            )
        )
    if step.confirmed_at is not None and step.confirmed_by is not None:
        how = (
            f"re-sent under {step.key} by generation {step.confirmed_by}"
            if step.resent
            else f"sent under {step.key}"
        )
        events.append(
            Event(
                at=step.confirmed_at,
                kind="confirm",
                generation=step.confirmed_by,
                seq=seq,
                key=step.key,
                text=f"seq {seq} confirmed: {how}; result {step.result_id}, "
                f"remote {step.remote_status}",
                label=f"confirm {seq}",
                details=(
                    str(step.remote_status),
                    str(step.result_id),
                    clock_text(step.confirmed_at),
                ),
            )
        )
    return events


def _claim_event(claim: Claim, now: datetime) -> Event:
    gen, why = claim.generation, claim.why
    text = f"generation {gen} claimed by {claim.owner}"
    prev = f"{claim.previous_owner} (generation {gen - 1})"
    expired = claim.previous_expired_at
    until = f" until {clock_text(expired, now)}" if expired is not None else ""
    if why == "first":
        text += " (first claim)"
        details: tuple[str, ...] = ("first claim",)
    elif why == "handed_back":
        text += f"; generation {gen - 1} had handed the run back"
        details = ("run was free",)
    elif why == "expired":
        assert expired is not None
        text += f", taking over from {prev} whose lease had expired {clock_text(expired, now)}"
        details = ("took over", "lease expired")
    elif why == "owner_dead":
        text += (
            f", taking over from {prev} whose lease still ran{until}: its process was "
            "proved gone on its host"
        )
        details = ("took over", "owner dead")
    elif why == "forced":
        text += (
            f", taking over from {prev} whose lease still ran{until}: a forced takeover, "
            "nobody proved that worker dead"
        )
        details = ("took over", "forced")
    else:  # recorded before claims kept their reason
        text += (
            f", taking over from {prev} whose lease still ran{until}: its process was "
            "proved gone, or the takeover was forced"
        )
        details = ("took over", "live lease")
    return Event(
        at=claim.claimed_at,
        kind="takeover" if claim.takeover else "claim",
        generation=gen,
        text=text,
        label=f"claim gen {gen}",
        details=(*details, clock_text(claim.claimed_at)),
    )


def _death_event(claim: Claim, last_write: dict[int, datetime], now: datetime) -> Event:
    """How the generation before a takeover ended: died, or (forced) fenced out alive."""
    gen = claim.generation - 1
    at = last_write.get(gen, claim.claimed_at)
    after = f"after {clock_text(at)}"
    kind, label = "crash", "crash"
    if claim.why == "expired":
        why = f"its lease expired and generation {claim.generation} took the run"
        details: tuple[str, ...] = ("died", after)
    elif claim.why == "owner_dead":
        why = (
            f"its process was proved gone on its host and generation {claim.generation} took "
            "its live lease"
        )
        details = ("died", after)
    elif claim.why == "forced":
        why = (
            f"generation {claim.generation} took its live lease by force; if it still runs, "
            "its next write is fenced"
        )
        kind, label = "fenced", "fenced"
        details = ("fenced out", after)
    else:  # recorded before claims kept their reason
        why = (
            f"generation {claim.generation} took its live lease (process gone, or the "
            "takeover was forced)"
        )
        details = ("died or fenced", after)
    return Event(
        at=at,
        kind=kind,
        generation=gen,
        text=f"generation {gen} ({claim.previous_owner}) wrote nothing after "
        f"{clock_text(at, now)}: {why}",
        label=label,
        details=details,
    )


def _stop_event(claim: Claim, last_write: dict[int, datetime], now: datetime) -> Event:
    gen = claim.generation - 1
    at = last_write[gen]
    return Event(
        at=at,
        kind="stopped",
        generation=gen,
        text=f"generation {gen} wrote nothing after {clock_text(at, now)} and gave the run "
        "back: a clean stop, or its supervisor saw it exit",
        label="stopped",
        details=("handed back", f"after {clock_text(at)}"),
    )
