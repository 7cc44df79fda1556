"""The events of one run's timeline, in order: claims and takeovers, decisions, intents,
confirms, deaths, stops, and the operator's acts (cancel, retry, a resolved call in doubt).

:func:`events_of` makes them from the steps and claims :mod:`.history` judged;
:func:`retry_events` and :func:`resolution_events` add what ``run_retries`` and
``call_resolutions`` keep. Every event is one sentence and a short label for the picture.
"""

from __future__ import annotations

from datetime import datetime

from agent_runtime.llm.conversation import DONE
from agent_runtime.store.records import Run

from .attention import Attention, PastResolution
from .views import Claim, Event, PastRetry, Step, clock_text, owner_pid

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
    "attention": 4,
    "expired": 5,
    "done": 6,
    "failed": 6,
    "cancelled": 6,
    "retried": 7,
    "resolved": 7,
}


def event_order(event: Event) -> tuple[datetime, int, int]:
    """The sort key of the timeline: time, then kind, then step."""
    return (event.at, _RANK.get(event.kind, 9), -1 if event.seq is None else event.seq)


def events_of(
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
    events.sort(key=event_order)
    return events


def retry_events(retry: PastRetry, now: datetime) -> list[Event]:
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


def park_event(attention: Attention, now: datetime) -> Event:
    """Where a restart stopped the run for an operator."""
    return _parked(
        attention.parked_at, attention.parked_by, attention.seq, attention.key, attention.tool, now
    )


def _parked(at: datetime, generation: int, seq: int, key: str, tool: str, now: datetime) -> Event:
    return Event(
        at=at,
        kind="attention",
        generation=generation,
        seq=seq,
        key=key,
        text=f"generation {generation} parked the run at {clock_text(at, now)}: seq {seq} "
        f"({tool}) was in doubt under {key} and nothing can tell whether it acted; the run "
        "needs attention",
        label="needs attention",
        details=(f"seq {seq} in doubt", clock_text(at)),
    )


def resolution_events(resolution: PastResolution, steps: list[Step], now: datetime) -> list[Event]:
    """A past park, the operator's decision, and (a redo) the intent that was in doubt."""
    r = resolution
    step = next((s for s in steps if s.seq == r.seq), None)
    tool = step.tool if step is not None else "?"
    events = []
    rewritten = step is None or (step.intent_by, step.intent_at) != (r.intent_by, r.intent_at)
    if r.choice == "redo" and rewritten:  # the call's intent now is the one after the redo
        events.append(
            Event(
                at=r.intent_at,
                kind="intent",
                generation=r.intent_by,
                seq=r.seq,
                key=r.idem_key,
                text=f"seq {r.seq} intent written by generation {r.intent_by} under "
                f"{r.idem_key}; in doubt until an operator ordered it sent again",
                label=f"intent {r.seq} ?",
                details=(r.idem_key, clock_text(r.intent_at)),
            )
        )
    events.append(_parked(r.parked_at, r.generation, r.seq, r.idem_key, tool, now))
    why = f" ({r.reason})" if r.reason else ""
    events.append(
        Event(
            at=r.resolved_at,
            kind="resolved",
            generation=None,
            seq=r.seq,
            key=r.idem_key,
            text=f"resolved by an operator at {clock_text(r.resolved_at, now)}: seq {r.seq} "
            f"{r.choice}{why}, {r.outcome}; the run is pending again",
            label=f"{r.choice} {r.seq}",
            details=(f"operator: {r.choice}", clock_text(r.resolved_at)),
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
                text=f"seq {seq} confirmed: {how}; result {step.result_text}, "
                f"remote {step.remote_status}",
                label=f"confirm {seq}",
                details=(
                    str(step.remote_status),
                    step.result_text,
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
