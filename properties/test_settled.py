"""The settled invariant when a call was set aside (the same steps, in another order), and
a done run's output."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from .baseline import Baseline, normalised_output, settled
from .observe import CallRow, DecisionRow, Snapshot
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


def test_a_done_run_whose_output_is_not_its_final_answers_text_is_not_settled() -> None:
    """The output is the journaled final answer's text exactly, and the crash-free run's up
    to the call numbers and ids the mock writes (a crash may cost a model call)."""
    text = "All done (call #2): server srv-2 (srv-0000001)."
    baseline = Baseline(tools=("a", "done"), args=({"x": 1}, {}), output=normalised_output(text))
    decisions = [
        DecisionRow(seq=0, tool="a", args={"x": 1}, llm_call=1, generation=1),
        DecisionRow(seq=1, tool="done", args={}, llm_call=2, generation=1),
    ]
    calls = [CallRow(seq=0, key="r0:0", state="confirmed", result={}, remote_status="created",
                     generation=1, confirm_generation=1)]  # fmt: skip
    done = _snapshot(decisions=decisions, calls=calls, effects=[], status="done", model_calls=2)

    def finished(output: str | None, final_text: str | None) -> Snapshot:
        row = replace(done.runs["r0"], output=output, final_text=final_text)
        return replace(done, runs={"r0": row})

    later = "All done (call #3): server srv-3 (srv-0000001)."  # one model call more
    assert settled(finished(later, later), {"r0": baseline}, []) == []
    lost, unlike = settled(finished(None, text), {"r0": baseline}, [])  # the answer dropped
    assert "finished with output None, but the final answer journaled for it says" in str(lost)
    assert "finished with output None, the crash-free run with 'All done" in str(unlike)
    other = "Nothing done (call #2)."
    (wrong,) = settled(finished(other, other), {"r0": baseline}, [])
    assert "the crash-free run with 'All done (call #N): server srv-N (srv-N).'" in str(wrong)


def test_a_final_answers_arguments_are_not_compared_with_the_baseline() -> None:
    """A final answer is journaled with the arguments the model gave it (a spoiled one's
    too, since it is no call): they act on nothing, so only its text, the output, counts."""
    baseline = Baseline(tools=("done",), args=({},))
    spoiled = [DecisionRow(seq=0, tool="done", args={"force": True}, llm_call=1, generation=1)]
    now = _snapshot(decisions=spoiled, calls=[], effects=[], status="done")
    assert settled(now, {"r0": baseline}, []) == []
