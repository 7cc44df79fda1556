"""What the timeline says in words: which lanes a run has, how each lane got the run, and
which mark an event gets. The drawing (:mod:`.timeline`) only places what these answer.
"""

from __future__ import annotations

from .views import Event, RunHistory


def lane_generations(history: RunHistory) -> list[int | None]:
    generations = {c.generation for c in history.claims}
    generations |= {e.generation for e in history.events if e.generation is not None}
    lanes: list[int | None] = [*sorted(generations)]
    if any(e.generation is None for e in history.events):
        lanes.append(None)  # the operator's own acts (a cancel)
    return lanes


def lane_caption(history: RunHistory, generation: int | None) -> tuple[str, str, str]:
    """(name, owner, how it got the run) of a lane."""
    if generation is None:
        return "operator", "", "outside any lease"
    owner = history.owners.get(generation, "")
    claim = next((c for c in history.claims if c.generation == generation), None)
    how = (
        {
            "first": "first claim",
            "handed_back": "claimed a free run",
            "expired": "took over: lease expired",
            "owner_dead": "took over: owner dead",
            "forced": "took over: forced",
            None: "took over a live lease",  # an older claim, its reason not recorded
        }.get(claim.why, "")
        if claim
        else "claim not recorded"
    )
    run = history.run
    if generation == run.generation and run.status == "running" and run.owner is not None:
        if not run.lease_live:
            how += "; lease expired"
        elif history.owner_gone:
            how += "; process gone"
        else:
            how += "; holds the lease"
    return f"generation {generation}", owner, how


def mark_of(event: Event, history: RunHistory) -> tuple[str, bool]:
    """(mark kind, in doubt) of an event."""
    if event.kind == "confirm":
        step = next(s for s in history.steps if s.seq == event.seq)
        return ("already_done" if step.remote_status == "already_done" else "created"), False
    if event.kind == "intent":
        step = next(s for s in history.steps if s.seq == event.seq)
        current = step.intent_by == event.generation and step.intent_at == event.at
        return "intent", step.state == "in_doubt" if current else event.label.endswith("?")
    return event.kind, False
