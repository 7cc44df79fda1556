"""How the shadow (:mod:`properties.shadow`) names rows and tells what it found: one line
per row, and the violations a lost or stale write makes."""

from __future__ import annotations

from . import durability
from .durability import confirm_write
from .observe import CallRow, DecisionRow
from .violations import Violation


def stale(run: str, seq: int, what: str, generation: int, floor: int) -> Violation:
    return Violation(
        "lost_state",
        run,
        seq,
        f"stale write: a {what} by generation {generation} appeared after generation "
        f"{floor} had taken the run over (fencing let a worker that lost its lease write)",
    )


def d(d: DecisionRow) -> str:
    return f"{d.tool}{d.args} (llm_call {d.llm_call}, generation {d.generation})"


def c(c: CallRow) -> str:
    rid = (c.result or {}).get("id")
    return f"{c.state} {c.key} result={rid} remote={c.remote_status}"


def s(state: durability.RunState) -> str:
    status, owner, generation, lease, failure = state
    until = f" until {lease:%H:%M:%S}" if lease is not None else ""
    why = f" ({failure})" if failure else ""
    return f"{status}, owner {owner}, generation {generation}{until}{why}"


def refused(call: CallRow) -> bool:
    """A call the runtime refused (never sent): its row is written with its answer, by
    ``record_decision``, and goes or stays with it."""
    return call.remote_status == "rejected" and call.state == "failed"


def lost_durable(run: str, seq: int, old: CallRow, flushed_at: int) -> Violation:
    w = confirm_write(old)
    why = (
        "it commits durably"
        if w.commit == durability.DURABLE
        else "a durable write seen after it had flushed it"
    )
    return Violation(
        "lost_state",
        run,
        seq,
        f"{w.what} {c(old)} (`{w.statement}`, {old.effect}) was lost in a database crash, "
        f"but {why}",
    )


def lost_returned(run: str, seq: int, gone: str) -> Violation:
    return Violation(
        "lost_state",
        run,
        seq,
        f"{gone} before a database crash, which took it: the design calls it durable",
    )
