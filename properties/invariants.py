"""The invariants checked against a snapshot after every event (see ARCHITECTURE.md).

Each returns the violations it finds; the runner raises them. An *effect* is a record a
remote holds (:mod:`properties.remotes`): a cloud resource, a ticket, one delivery of an
email. The groups:

**duplicate_effect**
    no key acted on twice (a cloud resource and a ticket are one record per key by the
    remote's own rule; an email is delivered again every time it is sent, so two deliveries
    under one key are a ``checked`` or ``once`` call sent twice); a run holds at most one
    effect of each kind, and no more effects than it decided effectful steps.
**divergence**
    every effect sits under a key the journal wrote as an intent before acting, with the
    journaled tool and equal arguments; every confirm of an effectful call names the effect
    held under its key; a read's confirm is what the remote holds; a decision only refers to
    results the run really confirmed; ``runs.llm_calls`` counts the journaled answers; every
    journaled answer is acted on whole (:func:`answers_whole`); the model's own counter is
    explained ask by ask (``properties.accounting``).
**remote_truth**
    every confirm's ``remote_status`` is what the remote answered the confirming
    generation's last request under its key (``created`` only if that request acted,
    ``found`` only if its check found the effect); an operator's confirm says ``operator``.
**parked** (:func:`parked_truth`)
    a run needs attention only with a ``once`` call in doubt.
**lost_state** (``properties.shadow``), **settled** (``properties.baseline``), and the
runner's own: **worker**, **zombie_model_call**, **fenced_act**, **live_claim**,
**foreign_renewal**, **stranded**, **claim_truth**, **lease_integrity**, **parked_acted**,
**overtaken_write**, **double_claim** (``properties.race``).
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Final

from mock_remotes.supportcore import ORDERS

from .accounting import Ask, ask_accounting
from .observe import KIND_OF, CallRow, DecisionRow, Snapshot
from .violations import Violation, Violations, raise_if

__all__ = [
    "Violation",
    "Violations",
    "no_divergence",
    "no_duplicate_effect",
    "parked_truth",
    "raise_if",
    "remote_truth",
]

# Answers that mean "this request's effect exists", by what the confirm must then say.
DELIVERED: Final = frozenset({"created", "already_done", "found"})
OPERATOR: Final = "operator"  # the remote status of a call an operator confirmed


def no_duplicate_effect(now: Snapshot) -> list[Violation]:
    found: list[Violation] = []
    for run in sorted({row.run for row in now.effects} | set(now.runs)):
        rows = now.effects_of(run)
        for key, n in sorted(Counter(row.key for row in rows).items()):
            if n > 1:
                ids = ", ".join(r.id for r in rows if r.key == key)
                kind = next(r.kind for r in rows if r.key == key)
                found.append(
                    Violation(
                        "duplicate_effect",
                        run,
                        None,
                        f"{key} acted {n} times ({kind} {ids}): a call whose remote does not "
                        "deduplicate was sent again",
                    )
                )
        for kind, n in sorted(Counter(row.kind for row in rows).items()):
            if n > 1:
                held = ", ".join(f"{r.id} under {r.key}" for r in rows if r.kind == kind)
                found.append(
                    Violation(
                        "duplicate_effect",
                        run,
                        None,
                        f"the remotes hold {n} {kind}s ({held}); the crash-free run makes one",
                    )
                )
        decided = sum(1 for d in now.decisions.get(run, {}).values() if d.tool in KIND_OF)
        if len(rows) > decided:
            found.append(
                Violation(
                    "duplicate_effect",
                    run,
                    None,
                    f"the remotes hold {len(rows)} effects for {decided} decided effectful steps",
                )
            )
    return found


def no_divergence(now: Snapshot, asks: list[Ask]) -> list[Violation]:
    found = _effects_journaled(now) + _confirms_true(now)
    for run, calls in now.calls.items():  # the design's key, a refused call's too
        found += [Violation("divergence", run, c.seq, f"a call journaled under key {c.key}: "
                            f"its key is {run}:{c.seq}") for c in calls.values()
                  if c.key != f"{run}:{c.seq}"]  # fmt: skip
    for run, decisions in now.decisions.items():
        found += _references(run, decisions, now.calls.get(run, {}))
        llm_calls = now.runs[run].llm_calls if run in now.runs else 0
        answered = len({d.llm_call for d in decisions.values()})
        if llm_calls != answered:
            found.append(
                Violation(
                    "divergence",
                    run,
                    None,
                    f"runs.llm_calls is {llm_calls} but the journal holds the decisions of "
                    f"{answered} model answers",
                )
            )
    found += _steps_whole(now)
    found += answers_whole(now)
    found += ask_accounting(now, asks)
    return found


def _effects_journaled(now: Snapshot) -> list[Violation]:
    """Every effect sits under an intent the journal wrote first, for the same tool and
    arguments."""
    found: list[Violation] = []
    by_key = {c.key: (run, c) for run, calls in now.calls.items() for c in calls.values()}
    for row in now.effects:
        owner = by_key.get(row.key)
        if owner is None:
            keys = sorted(c.key for c in now.calls.get(row.run, {}).values())
            found.append(
                Violation(
                    "divergence",
                    row.run,
                    None,
                    f"a remote acted on key {row.key} ({row.kind} {row.id}) but the journal "
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
                    f"a remote made a {row.kind} under {row.key}, the journal decided "
                    f"{decision.tool if decision else 'nothing'}",
                )
            )
        elif decision.args != row.args:
            found.append(
                Violation(
                    "divergence",
                    run,
                    call.seq,
                    f"a remote made {row.kind} {row.id} with {row.args}, the journal "
                    f"decided {decision.args}",
                )
            )
    return found


def _confirms_true(now: Snapshot) -> list[Violation]:
    """Every confirm names what the remote holds: the effect under its key, or (a read) the
    record it read."""
    found: list[Violation] = []
    held: dict[str, Any] = {}
    for row in now.effects:
        held.setdefault(row.key, row)  # an email sent twice: its first delivery
    for run, calls in now.calls.items():
        for seq, call in calls.items():
            decision = now.decisions.get(run, {}).get(seq)
            if call.state != "confirmed" or decision is None:
                continue
            rid = (call.result or {}).get("id")
            if decision.tool == "lookup_order":
                order = ORDERS.get(str(decision.args.get("order_id")))
                if order is None or {k: (call.result or {}).get(k) for k in order} != order:
                    found.append(
                        Violation(
                            "divergence",
                            run,
                            seq,
                            f"read {decision.args} as {call.result}, the desk holds {order}",
                        )
                    )
                continue
            if decision.tool not in KIND_OF:
                continue
            record = held.get(call.key)
            if call.effect == "once" and call.result is None and record is not None:
                continue  # the once email says nothing back: it acted, there is no id
            if record is None or record.id != rid:
                has = "nothing" if record is None else record.id
                found.append(
                    Violation(
                        "divergence",
                        run,
                        seq,
                        f"confirmed with result {rid} ({call.remote_status}) but the remote "
                        f"holds {has} under {call.key}",
                    )
                )
    return found


# A decision's argument that must come from an earlier confirmed result:
# tool -> [(argument, earlier tool, field of its result, "is" or "in")].
_REFERS: Final = {
    "create_database": [("server_id", "create_server", "id", "is")],
    "create_dns_record": [("value", "create_server", "ip", "is")],
    "file_ticket": [("order_id", "lookup_order", "id", "is")],
    "send_email": [("to", "lookup_order", "email", "is"), ("subject", "file_ticket", "id", "in")],
}
# ... unless it was decided in one answer with that earlier tool's call (a parallel answer):
# then it is what that call was asked with, (tool, argument) -> the call's argument.
_SAME_ANSWER: Final = {("file_ticket", "order_id"): "order_id"}


def _references(
    run: str, decisions: dict[int, DecisionRow], calls: dict[int, CallRow]
) -> list[Violation]:
    """A decision may only refer to results the run confirmed before it. A call the runtime
    refused (never sent; a spoiled answer's arguments) is not judged: it acted on nothing."""
    found: list[Violation] = []
    for seq, d in sorted(decisions.items()):
        refused = seq in calls and calls[seq].remote_status == "rejected"
        for field_, source, wanted, how in [] if refused else _REFERS.get(d.tool, []):
            results = [
                calls[s].result or {}
                for s, prior in sorted(decisions.items())
                if s < seq and prior.tool == source and s in calls
                if calls[s].state == "confirmed"
            ]
            expected = results[0].get(wanted) if results else None
            same = _SAME_ANSWER.get((d.tool, field_))
            if same is not None and (sibling := _sibling(decisions, d, source)) is not None:
                twin = calls.get(sibling.seq)
                if twin is not None and twin.remote_status == "rejected":
                    continue  # the model spoiled its twin's arguments: nothing to refer to
                expected = sibling.args.get(same)
            got = d.args.get(field_)
            ok = got == expected if how == "is" else str(expected) in str(got)
            if expected is None or not ok:
                found.append(
                    Violation(
                        "divergence",
                        run,
                        seq,
                        f"{d.tool} was decided with {field_}={got!r}, but the run's confirmed "
                        f"{source} has {wanted}={expected!r} (a history that never happened)",
                    )
                )
    return found


def _sibling(decisions: dict[int, DecisionRow], d: DecisionRow, tool: str) -> DecisionRow | None:
    """The call of ``tool`` decided before ``d`` in the same model answer, if any."""
    return next(
        (p for s, p in sorted(decisions.items()) if s < d.seq and p.tool == tool
         and p.llm_call == d.llm_call),
        None,
    )  # fmt: skip


def answers_whole(now: Snapshot) -> list[Violation]:
    """Each journaled model answer's tool calls are the decisions journaled with it: every
    call of the answer has its own decision, under the model's call id, in the answer's
    order, and no decision claims an answer it did not come from."""
    found: list[Violation] = []
    for run, answers in now.answers_by_run.items():
        decisions = now.decisions.get(run, {})
        for llm_call, call_ids in sorted(answers.items()):
            made = [d.call_id for _, d in sorted(decisions.items()) if d.llm_call == llm_call]
            if call_ids and made != call_ids:
                found.append(
                    Violation(
                        "divergence",
                        run,
                        None,
                        f"model answer {llm_call} called {call_ids}, the journal decided "
                        f"{made}: an answer is acted on whole, each call once",
                    )
                )
    return found


def _steps_whole(now: Snapshot) -> list[Violation]:
    """What the step tables' foreign keys once held (schema 6 dropped them, each cost a row
    lock per write): no call without its decision, no decision without its answer."""
    found: list[Violation] = []
    for run in now.runs:
        decisions, answers = now.decisions.get(run, {}), now.answers_by_run.get(run, {})
        orphans = sorted(seq for seq in now.calls.get(run, {}) if seq not in decisions)
        unanswered = sorted({d.llm_call for d in decisions.values()} - answers.keys())
        if orphans:
            found.append(
                Violation("divergence", run, orphans[0], f"calls {orphans} have no decision")
            )
        if unanswered:
            found.append(
                Violation(
                    "divergence",
                    run,
                    None,
                    f"decisions of model answers {unanswered} have no answer journaled",
                )
            )
    return found


def remote_truth(now: Snapshot) -> list[Violation]:
    """A confirm's ``remote_status`` is the remote's answer to the confirming generation.

    The worker that confirmed a call had its answer from its last successful request under
    the call's key (a send, or a checked call's check); the remotes logged every answer
    with the request's generation (and whether a ``drop_after`` knob lost it). So the last
    delivered ``created``, ``already_done`` or ``found`` of that generation under that key
    is what the confirm must say. A read has no effect to tell; an operator's confirm
    says ``operator``.
    """
    found: list[Violation] = []
    delivered: dict[tuple[str, int | None], str] = {}
    for a in now.answers:
        if not a.dropped and a.answer in DELIVERED:
            delivered[a.key, a.generation] = a.answer
    for run, calls in sorted(now.calls.items()):
        for seq, call in sorted(calls.items()):
            decision = now.decisions.get(run, {}).get(seq)
            effectful = decision is not None and decision.tool in KIND_OF
            if call.state != "confirmed" or not effectful:
                continue
            if call.remote_status == OPERATOR:
                if call.effect != "once" or call.confirm_generation is not None:
                    found.append(
                        Violation(
                            "remote_truth",
                            run,
                            seq,
                            f"{call.key} ({call.effect}) says an operator confirmed it, "
                            f"by generation {call.confirm_generation}",
                        )
                    )
                continue
            truth = delivered.get((call.key, call.confirm_generation))
            if truth is None:
                found.append(
                    Violation(
                        "remote_truth",
                        run,
                        seq,
                        f"confirmed {call.key} as {call.remote_status} by generation "
                        f"{call.confirm_generation}, but the remote answered no request of "
                        "that generation under that key",
                    )
                )
            elif truth != call.remote_status:
                found.append(
                    Violation(
                        "remote_truth",
                        run,
                        seq,
                        f"confirmed {call.key} as {call.remote_status}, but the remote answered "
                        f"generation {call.confirm_generation}'s request {truth}",
                    )
                )
    return found


def parked_truth(now: Snapshot) -> list[Violation]:
    """A run needs attention only while one of its ``once`` calls is in doubt."""
    found: list[Violation] = []
    for run, row in sorted(now.runs.items()):
        if row.status != "needs_attention":
            continue
        doubt = [c for c in now.calls.get(run, {}).values() if c.state == "intent"]
        if not any(c.effect == "once" for c in doubt):
            held = ", ".join(f"{c.key} {c.effect}" for c in doubt) or "none"
            found.append(
                Violation(
                    "parked",
                    run,
                    None,
                    f"the run needs attention, but no once call of it is in doubt (intents "
                    f"without a confirm: {held}); only a once call may stop a run for an "
                    "operator",
                )
            )
    return found
