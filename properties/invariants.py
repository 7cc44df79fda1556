"""The invariants checked against a snapshot after every event (see ARCHITECTURE.md).

Each returns the violations it finds; the runner raises them. The groups:

**duplicate_effect**
    a run holds at most one cloud resource of each kind and no more resources than it
    decided tool steps; the cloud keeps one record per key, so "no key acted on twice"
    is "no second key for one step".
**divergence**
    every resource the cloud holds sits under a key the journal wrote as an intent
    before acting, with the journaled tool and equal arguments; every confirm names the
    resource the cloud holds under its key; a decision only refers to results the run
    really confirmed; ``runs.llm_calls`` equals the journaled decisions; the model's own
    counter is explained ask by ask (``properties.accounting``).
**remote_truth**
    every confirm's ``remote_status`` is what the cloud answered the confirming
    generation's request (``created`` only if that request made the resource).
**lost_state** (``properties.shadow``), **settled** (``properties.baseline``), and the
runner's own: **worker**, **zombie_model_call**, **fenced_act**, **live_claim**,
**foreign_renewal**, **stranded**.
"""

from __future__ import annotations

from collections import Counter

from .accounting import Ask, ask_accounting
from .observe import KIND_OF, CallRow, DecisionRow, Snapshot
from .violations import Violation, Violations, raise_if

__all__ = [
    "Violation",
    "Violations",
    "no_divergence",
    "no_duplicate_effect",
    "raise_if",
    "remote_truth",
]


def no_duplicate_effect(now: Snapshot) -> list[Violation]:
    found: list[Violation] = []
    for run in sorted({row.run for row in now.cloud} | set(now.runs)):
        rows = now.cloud_of(run)
        for kind, n in sorted(Counter(row.kind for row in rows).items()):
            if n > 1:
                held = ", ".join(f"{r.id} under {r.key}" for r in rows if r.kind == kind)
                found.append(
                    Violation(
                        "duplicate_effect",
                        run,
                        None,
                        f"the cloud holds {n} {kind}s ({held}); the crash-free run creates one",
                    )
                )
        decided = sum(1 for d in now.decisions.get(run, {}).values() if d.tool in KIND_OF)
        if len(rows) > decided:
            found.append(
                Violation(
                    "duplicate_effect",
                    run,
                    None,
                    f"the cloud holds {len(rows)} resources for {decided} decided tool steps",
                )
            )
    return found


def no_divergence(now: Snapshot, asks: list[Ask]) -> list[Violation]:
    found: list[Violation] = []
    by_key = {c.key: (run, c) for run, calls in now.calls.items() for c in calls.values()}
    for row in now.cloud:
        owner = by_key.get(row.key)
        if owner is None:
            keys = sorted(c.key for c in now.calls.get(row.run, {}).values())
            found.append(
                Violation(
                    "divergence",
                    row.run,
                    None,
                    f"the cloud acted on key {row.key} ({row.kind} {row.id}) but the journal "
                    f"holds no intent under that key (its keys: {', '.join(keys) or 'none'})",
                )
            )
            continue
        run, call = owner
        decision = now.decisions.get(run, {}).get(call.seq)
        if decision is None or KIND_OF.get(decision.tool) != row.kind:
            found.append(
                Violation(
                    "divergence",
                    run,
                    call.seq,
                    f"the cloud created a {row.kind} under {row.key}, the journal decided "
                    f"{decision.tool if decision else 'nothing'}",
                )
            )
        elif decision.args != row.args:
            found.append(
                Violation(
                    "divergence",
                    run,
                    call.seq,
                    f"the cloud created {row.kind} {row.id} with {row.args}, the journal "
                    f"decided {decision.args}",
                )
            )
    held = {row.key: row for row in now.cloud}
    for run, calls in now.calls.items():
        for seq, call in calls.items():
            if call.state != "confirmed":
                continue
            rid = (call.result or {}).get("id")
            record = held.get(call.key)
            if record is None or record.id != rid:
                has = "nothing" if record is None else record.id
                found.append(
                    Violation(
                        "divergence",
                        run,
                        seq,
                        f"confirmed with result {rid} ({call.remote_status}) but the cloud holds "
                        f"{has} under {call.key}",
                    )
                )
    for run, decisions in now.decisions.items():
        found += _references(run, decisions, now.calls.get(run, {}))
        llm_calls = now.runs[run].llm_calls if run in now.runs else 0
        if llm_calls != len(decisions):
            found.append(
                Violation(
                    "divergence",
                    run,
                    None,
                    f"runs.llm_calls is {llm_calls} but {len(decisions)} decisions are journaled",
                )
            )
    found += ask_accounting(now, asks)
    return found


def _references(
    run: str, decisions: dict[int, DecisionRow], calls: dict[int, CallRow]
) -> list[Violation]:
    """A decision may only refer to results the run confirmed before it."""
    found: list[Violation] = []
    for seq, d in sorted(decisions.items()):
        if d.tool not in ("create_database", "create_dns_record"):
            continue
        field_, wanted = ("server_id", "id") if d.tool == "create_database" else ("value", "ip")
        servers = [
            calls[s].result
            for s, prior in sorted(decisions.items())
            if s < seq and prior.tool == "create_server" and s in calls
            if calls[s].state == "confirmed"
        ]
        expected = (servers[0] or {}).get(wanted) if servers else None
        if d.args.get(field_) != expected:
            found.append(
                Violation(
                    "divergence",
                    run,
                    seq,
                    f"{d.tool} was decided with {field_}={d.args.get(field_)!r}, but the run's "
                    f"confirmed server has {wanted}={expected!r} (a history that never happened)",
                )
            )
    return found


def remote_truth(now: Snapshot) -> list[Violation]:
    """A confirm's ``remote_status`` is the cloud's answer to the confirming generation.

    The worker that confirmed a call had its answer from its last successful request under
    the call's key; the cloud logged every answer with the request's generation (and
    whether its ``drop_after`` knob lost it). So the last delivered ``created`` or
    ``already_done`` of that generation under that key is what the confirm must say.
    """
    found: list[Violation] = []
    delivered: dict[tuple[str, int | None], str] = {}
    for a in now.answers:
        if not a.dropped and a.answer in ("created", "already_done"):
            delivered[a.key, a.generation] = a.answer
    for run, calls in sorted(now.calls.items()):
        for seq, call in sorted(calls.items()):
            if call.state != "confirmed":
                continue
            truth = delivered.get((call.key, call.confirm_generation))
            if truth is None:
                found.append(
                    Violation(
                        "remote_truth",
                        run,
                        seq,
                        f"confirmed {call.key} as {call.remote_status} by generation "
                        f"{call.confirm_generation}, but the cloud answered no request of that "
                        "generation under that key",
                    )
                )
            elif truth != call.remote_status:
                found.append(
                    Violation(
                        "remote_truth",
                        run,
                        seq,
                        f"confirmed {call.key} as {call.remote_status}, but the cloud answered "
                        f"generation {call.confirm_generation}'s request {truth}",
                    )
                )
    return found
