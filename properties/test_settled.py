"""The settled invariant when a call was set aside: the same steps, in another order."""

from __future__ import annotations

from typing import Any

from .baseline import Baseline, settled
from .observe import CallRow, DecisionRow
from .test_invariants import _snapshot


def test_after_a_refused_call_the_same_steps_in_another_order_are_settled() -> None:
    """A parallel answer's refused call is decided anew after its sibling ran: the steps are
    the crash-free run's, in another order. Without a refused call the order counts."""
    baseline = Baseline(tools=("a", "b", "done"), args=({"x": 1}, {"y": 2}, {}))

    def step(seq: int, tool: str, args: dict[str, Any], llm: int) -> DecisionRow:
        return DecisionRow(seq=seq, tool=tool, args=args, llm_call=llm, generation=1)

    def call(seq: int, state: str = "confirmed", remote: str = "created") -> CallRow:
        return CallRow(
            seq=seq,
            key=f"r0:{seq}",
            state=state,
            result={},
            remote_status=remote,
            generation=1,
            confirm_generation=1,
        )

    refused = [step(0, "a", {"x": 1}, 1), step(1, "b", {"y": 2}, 1)]
    redone = [*refused, step(2, "a", {"x": 1}, 2), step(3, "done", {}, 3)]
    calls = [call(0, "failed", "rejected"), call(1), call(2)]
    after = _snapshot(decisions=redone, calls=calls, effects=[], status="done", model_calls=3)
    assert settled(after, {"r0": baseline}, []) == []
    swapped = [step(0, "b", {"y": 2}, 1), step(1, "a", {"x": 1}, 1), step(2, "done", {}, 2)]
    plain = _snapshot(decisions=swapped, calls=[call(0), call(1)], effects=[], status="done")
    (found,) = settled(plain, {"r0": baseline}, [])
    assert "finished with tools ['b', 'a', 'done']" in str(found)
