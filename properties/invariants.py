"""The invariants of DESIGN.md section 7, checked against a snapshot after every event.

A :class:`Snapshot` is everything observable at one moment: the journal (runs,
decisions, tool calls), what the cloud holds, and the model's call counters.
The checks compare it with the :class:`Shadow` (every decision and confirm seen
so far), with the runner's :class:`Ask` ledger, and at the end with the crash-free
baseline. Every violation names the run, the step and what differed.

**no duplicate effect**
    a run holds at most one cloud resource of each kind and no more resources than
    it decided tool steps (the crash-free run creates a server, a database and a
    DNS record once each); the cloud keeps one record per key, so "no key acted on
    twice" is "no second key for one step".
**no lost state**
    a decision or intent, once seen, is never gone or changed; a confirm, once seen,
    never changes; a done run stays done. No row is written by a worker after its
    run was taken over (a *stale write*: the generation on the row is older than the
    run's generation when the event began).
**no divergence**
    every resource the cloud holds sits under a key the journal wrote as an intent
    before acting, with the journaled tool and equal arguments; every confirm names
    the resource the cloud holds under its key; a decision only refers to results
    the run really confirmed; ``runs.llm_calls`` equals the journaled decisions; and
    the model's own counter is explained step by step (see :class:`Ask`)::

        asks(run, seq) = [seq decided]                 -- the one journaled answer
                       + crashes at after_decide_before_journal on seq
                       + answers held by a worker that was then fenced (a zombie)
                       + answers held by a worker whose connection was dropped
                       + unusable answers (a model fault: malformed, unknown tool,
                         invalid arguments)
                       + answers still held by a paused or stalled worker

    Any other ask -- a second journaled answer for one step, an answer dropped for
    no reason the schedule gave, a call outside a decide -- is a violation.
**settled** (teardown)
    every run is done, its tools are the crash-free baseline's in order, every tool
    step is confirmed and matched by exactly one cloud resource, its arguments equal
    the baseline's up to the call numbers in names and the ids they refer to, and no
    answer is left in flight.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any, Final

from agent_runtime import db

from .remotes import CloudRow, Remotes

KIND_OF: Final = {
    "create_server": "server",
    "create_database": "database",
    "create_dns_record": "dns_record",
}
_NUMBER = re.compile(r"-(\d+)")


class Violation(AssertionError):
    """An invariant does not hold. ``kind`` is one of the four groups above."""

    def __init__(self, kind: str, run: str | None, seq: int | None, message: str) -> None:
        where = "" if run is None else f"run {run}" + ("" if seq is None else f" step {seq}")
        super().__init__(f"[{kind}] {where + ': ' if where else ''}{message}")
        self.kind = kind
        self.run = run
        self.seq = seq
        self.message = message


class Violations(AssertionError):
    """Several at once; the first one leads the message."""

    def __init__(self, found: list[Violation]) -> None:
        lines = [str(v) for v in found]
        more = f"\n  (+{len(found) - 1} more)\n  " + "\n  ".join(lines[1:]) if found[1:] else ""
        super().__init__(lines[0] + more)
        self.found = found


def raise_if(found: list[Violation]) -> None:
    if len(found) == 1:
        raise found[0]
    if found:
        raise Violations(found)


# -- what is observable -----------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class RunRow:
    id: str
    status: str
    owner: str | None
    generation: int
    llm_calls: int
    failure: str | None


@dataclass(frozen=True, kw_only=True)
class DecisionRow:
    seq: int
    tool: str
    args: dict[str, Any]
    llm_call: int
    generation: int


@dataclass(frozen=True, kw_only=True)
class CallRow:
    seq: int
    key: str
    state: str
    result: dict[str, Any] | None
    remote_status: str | None
    generation: int
    confirm_generation: int | None


@dataclass(frozen=True, kw_only=True)
class Snapshot:
    runs: dict[str, RunRow]
    decisions: dict[str, dict[int, DecisionRow]]
    calls: dict[str, dict[int, CallRow]]
    cloud: list[CloudRow]
    model_calls: dict[str, int]

    def cloud_of(self, run: str) -> list[CloudRow]:
        return [row for row in self.cloud if row.run == run]


def snapshot(conn: db.Connection, remotes: Remotes) -> Snapshot:
    runs = {
        r["id"]: RunRow(**r)
        for r in conn.execute(
            "SELECT id, status, owner, generation, llm_calls, failure FROM runs ORDER BY id"
        ).fetchall()
    }
    decisions: dict[str, dict[int, DecisionRow]] = {run: {} for run in runs}
    for r in conn.execute(
        "SELECT run_id, seq, tool, args, llm_call, generation FROM decisions ORDER BY run_id, seq"
    ).fetchall():
        run = r.pop("run_id")
        decisions.setdefault(run, {})[r["seq"]] = DecisionRow(**r)
    calls: dict[str, dict[int, CallRow]] = {run: {} for run in runs}
    for r in conn.execute(
        "SELECT run_id, seq, idem_key AS key, state, result, remote_status, generation,"
        " confirm_generation FROM tool_calls ORDER BY run_id, seq"
    ).fetchall():
        run = r.pop("run_id")
        calls.setdefault(run, {})[r["seq"]] = CallRow(**r)
    return Snapshot(
        runs=runs,
        decisions=decisions,
        calls=calls,
        cloud=remotes.cloud_rows(),
        model_calls=remotes.all_model_calls(),
    )


# -- the model's calls, one by one --------------------------------------------------------------


@dataclass(kw_only=True)
class Ask:
    """One model call, as the runner saw it happen between two gates of one worker.

    ``seq`` is the step the worker was deciding (the last ``before_decide`` it
    passed); ``fate`` is ``pending`` while the worker holds the answer,
    ``journaled`` once it passed ``after_decide`` for that step, ``lost`` once the
    worker can no longer write it (with ``reason`` and whether the schedule
    explains it: ``excused``).
    """

    run: str
    seq: int | None
    number: int  # the model's call count for the run after this call
    worker: str
    fate: str = "pending"
    reason: str = ""
    excused: bool = False


def name_number(args: dict[str, Any]) -> int | None:
    """The call number the mock model writes into every name (``srv-3`` -> 3)."""
    match = _NUMBER.search(str(args.get("name", "")))
    return int(match.group(1)) if match else None


# -- the shadow: what must never change ---------------------------------------------------------


@dataclass
class Shadow:
    decisions: dict[str, dict[int, DecisionRow]] = field(default_factory=lambda: defaultdict(dict))
    calls: dict[str, dict[int, CallRow]] = field(default_factory=lambda: defaultdict(dict))
    done: set[str] = field(default_factory=set)

    def check_and_update(self, now: Snapshot, gen_before: dict[str, int]) -> list[Violation]:
        found: list[Violation] = []
        for run, seen in self.decisions.items():
            for seq, old in seen.items():
                new = now.decisions.get(run, {}).get(seq)
                if new is None:
                    found.append(Violation("lost_state", run, seq, f"decision {_d(old)} is gone"))
                elif new != old:
                    found.append(
                        Violation(
                            "lost_state", run, seq, f"decision changed from {_d(old)} to {_d(new)}"
                        )
                    )
        for run, seen_calls in self.calls.items():
            for seq, old_call in seen_calls.items():
                new_call = now.calls.get(run, {}).get(seq)
                if new_call is None:
                    found.append(
                        Violation(
                            "lost_state", run, seq, f"{old_call.state} {old_call.key} is gone"
                        )
                    )
                elif new_call.key != old_call.key:
                    found.append(
                        Violation(
                            "lost_state",
                            run,
                            seq,
                            f"the call's idempotency key changed from {old_call.key} to "
                            f"{new_call.key}",
                        )
                    )
                elif old_call.state == "confirmed" and new_call != old_call:
                    found.append(
                        Violation(
                            "lost_state",
                            run,
                            seq,
                            f"confirmed call changed from {_c(old_call)} to {_c(new_call)}",
                        )
                    )
        for run in self.done:
            status = now.runs[run].status if run in now.runs else "gone"
            if status != "done":
                found.append(Violation("lost_state", run, None, f"was done, is now {status}"))
        found += self._stale_writes(now, gen_before)
        for run, decisions in now.decisions.items():
            self.decisions[run].update(decisions)
        for run, calls in now.calls.items():
            self.calls[run].update(calls)
        self.done |= {r.id for r in now.runs.values() if r.status == "done"}
        return found

    def _stale_writes(self, now: Snapshot, gen_before: dict[str, int]) -> list[Violation]:
        found: list[Violation] = []
        for run, floor in gen_before.items():
            for seq, d in now.decisions.get(run, {}).items():
                if seq not in self.decisions[run] and d.generation < floor:
                    found.append(_stale(run, seq, "decision", d.generation, floor))
            for seq, c in now.calls.get(run, {}).items():
                old = self.calls[run].get(seq)
                if old is None and c.generation < floor:
                    found.append(_stale(run, seq, "intent", c.generation, floor))
                confirmed_now = c.state == "confirmed" and (old is None or old.state != "confirmed")
                if confirmed_now and (c.confirm_generation or 0) < floor:
                    found.append(_stale(run, seq, "confirm", c.confirm_generation or 0, floor))
        return found


def _stale(run: str, seq: int, what: str, generation: int, floor: int) -> Violation:
    return Violation(
        "lost_state",
        run,
        seq,
        f"stale write: a {what} by generation {generation} appeared after generation "
        f"{floor} had taken the run over (fencing let a worker that lost its lease write)",
    )


def _d(d: DecisionRow) -> str:
    return f"{d.tool}{d.args} (llm_call {d.llm_call}, generation {d.generation})"


def _c(c: CallRow) -> str:
    rid = (c.result or {}).get("id")
    return f"{c.state} {c.key} result={rid} remote={c.remote_status}"


# -- the checks ---------------------------------------------------------------------------------


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
    found += _ask_accounting(now, asks)
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


def _ask_accounting(now: Snapshot, asks: list[Ask]) -> list[Violation]:
    found: list[Violation] = []
    seen: Counter[str] = Counter(a.run for a in asks)
    for run in sorted(set(now.model_calls) | set(seen)):
        if now.model_calls.get(run, 0) != seen[run]:
            found.append(
                Violation(
                    "divergence",
                    run,
                    None,
                    f"the model counted {now.model_calls.get(run, 0)} calls, the runner saw "
                    f"{seen[run]} asks",
                )
            )
    by_step: dict[tuple[str, int | None], list[Ask]] = defaultdict(list)
    for ask in asks:
        by_step[ask.run, ask.seq].append(ask)
    for (run, seq), step_asks in sorted(by_step.items(), key=lambda kv: (kv[0][0], kv[0][1] or -1)):
        if seq is None:
            for ask in step_asks:
                found.append(
                    Violation(
                        "divergence",
                        run,
                        None,
                        f"model call #{ask.number} was made by {ask.worker} outside a decide",
                    )
                )
            continue
        journaled = [a for a in step_asks if a.fate == "journaled"]
        decision = now.decisions.get(run, {}).get(seq)
        if len(journaled) > 1:
            numbers = ", ".join(f"#{a.number} by {a.worker}" for a in journaled)
            found.append(
                Violation(
                    "divergence",
                    run,
                    seq,
                    f"decided {len(journaled)} times (model calls {numbers}); a journaled "
                    "decision must be replayed, not asked again",
                )
            )
        elif journaled and decision is not None and decision.tool != "done":
            number = name_number(decision.args)
            if number != journaled[0].number:
                found.append(
                    Violation(
                        "divergence",
                        run,
                        seq,
                        f"the journal holds {decision.args.get('name')!r}, but the answer "
                        f"journaled for this step was model call #{journaled[0].number}",
                    )
                )
        for ask in step_asks:
            if ask.fate == "lost" and not ask.excused:
                found.append(
                    Violation(
                        "divergence",
                        run,
                        seq,
                        f"model call #{ask.number} (by {ask.worker}) was answered and its "
                        f"answer dropped with nothing in the schedule to explain it "
                        f"({ask.reason})",
                    )
                )
        if decision is not None and not journaled:
            found.append(
                Violation(
                    "divergence",
                    run,
                    seq,
                    f"the journal holds a decision ({decision.tool}) no worker was seen to journal",
                )
            )
    return found


# -- teardown -----------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Baseline:
    """The crash-free run: its tools in order and its arguments, normalised."""

    tools: tuple[str, ...]
    args: tuple[dict[str, Any], ...]


def normalised(args: dict[str, Any]) -> dict[str, Any]:
    """Arguments with call numbers and the ids they refer to replaced by placeholders."""
    out = dict(args)
    if "name" in out:
        out["name"] = _NUMBER.sub("-N", str(out["name"]))
    if "server_id" in out:
        out["server_id"] = "<server id>"
    if out.get("type") == "A" and "value" in out:
        out["value"] = "<server ip>"
    return out


def baseline_of(now: Snapshot, run: str) -> Baseline:
    decisions = [now.decisions[run][s] for s in sorted(now.decisions.get(run, {}))]
    return Baseline(
        tools=tuple(d.tool for d in decisions),
        args=tuple(normalised(d.args) for d in decisions),
    )


def settled(now: Snapshot, runs: list[str], baseline: Baseline, asks: list[Ask]) -> list[Violation]:
    found: list[Violation] = []
    for run in runs:
        row = now.runs.get(run)
        if row is None or row.status != "done":
            status = "missing" if row is None else f"{row.status} ({row.failure or 'no reason'})"
            found.append(Violation("settled", run, None, f"never finished: {status}"))
            continue
        mine = baseline_of(now, run)
        if mine.tools != baseline.tools:
            found.append(
                Violation(
                    "settled",
                    run,
                    None,
                    f"finished with tools {list(mine.tools)}, the crash-free run with "
                    f"{list(baseline.tools)}",
                )
            )
            continue
        for seq, (got, want) in enumerate(zip(mine.args, baseline.args, strict=True)):
            if got != want:
                found.append(
                    Violation("settled", run, seq, f"arguments {got}, crash-free run {want}")
                )
        calls = now.calls.get(run, {})
        held = {row.key: row for row in now.cloud_of(run)}
        for seq, d in sorted(now.decisions[run].items()):
            if d.tool not in KIND_OF:
                continue
            call = calls.get(seq)
            if call is None or call.state != "confirmed":
                found.append(
                    Violation(
                        "settled", run, seq, f"{d.tool} is {call.state if call else 'not called'}"
                    )
                )
            elif call.key not in held:
                found.append(
                    Violation(
                        "settled", run, seq, f"effect lost: nothing in the cloud under {call.key}"
                    )
                )
        expected_keys = {c.key for c in calls.values() if c.state == "confirmed"}
        if set(held) != expected_keys:
            found.append(
                Violation(
                    "settled",
                    run,
                    None,
                    f"the cloud holds keys {sorted(held)}, the journal confirmed "
                    f"{sorted(expected_keys)}",
                )
            )
    for ask in asks:
        if ask.fate == "pending":
            found.append(
                Violation(
                    "settled",
                    ask.run,
                    ask.seq,
                    f"model call #{ask.number} is still held by {ask.worker} after teardown",
                )
            )
    return found


def outcome(now: Snapshot, runs: list[str]) -> dict[str, Any]:
    """What two runners must agree on for the same schedule (the differential test)."""
    out: dict[str, Any] = {}
    for run in runs:
        row = now.runs.get(run)
        out[run] = {
            "status": None if row is None else row.status,
            "llm_calls": None if row is None else row.llm_calls,
            "model_calls": now.model_calls.get(run, 0),
            "decisions": [
                [d.seq, d.tool, d.args] for _, d in sorted(now.decisions.get(run, {}).items())
            ],
            "calls": [
                [c.seq, c.key, c.state, c.remote_status, (c.result or {}).get("id")]
                for _, c in sorted(now.calls.get(run, {}).items())
            ],
            "cloud": [[r.key, r.kind, r.id, r.args] for r in now.cloud_of(run)],
        }
    out["resources"] = dict(sorted(Counter(r.kind for r in now.cloud).items()))
    return out
