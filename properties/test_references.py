"""The ``divergence`` rule for references in one answer: a decision's argument that must
come from an earlier result, unless it was decided with that result's call in one answer
(a parallel answer) -- and not at all when the model spoiled that call's arguments."""

from __future__ import annotations

from .observe import CallRow, DecisionRow

ORDER = {"order_id": "A-1001"}


def test_a_ticket_decided_with_its_lookup_refers_to_the_order_the_lookup_asks_for() -> None:
    """A parallel answer's ticket names the order its lookup asks for (both from the user's
    message); in a later answer it must be the order the confirmed lookup read."""
    from .invariants import _references

    lookup = DecisionRow(seq=0, tool="lookup_order", args=ORDER, llm_call=1, generation=1)
    asked = CallRow(seq=0, key="r0:0", state="intent", result=None, remote_status=None,
                    generation=1, confirm_generation=None, effect="read")  # fmt: skip

    def ticket(order: str, llm_call: int) -> DecisionRow:
        args = {"order_id": order, "summary": "broken (#1)"}
        return DecisionRow(seq=1, tool="file_ticket", args=args, llm_call=llm_call, generation=1)

    assert _references("r0", {0: lookup, 1: ticket("A-1001", 1)}, {0: asked}) == []
    (other,) = _references("r0", {0: lookup, 1: ticket("B-2002", 1)}, {0: asked})
    assert "file_ticket was decided with order_id='B-2002'" in str(other)
    (later,) = _references("r0", {0: lookup, 1: ticket("A-1001", 2)}, {0: asked})
    assert "confirmed lookup_order has id=None (a history that never happened)" in str(later)


def test_a_ticket_whose_lookup_the_model_spoiled_in_the_same_answer_is_not_judged_by_it() -> None:
    """``invalid_args`` spoils a parallel answer's first call (the lookup, refused, never
    sent); its twin ticket still names the order from the user's message. Seen under
    ``ci``: the spoiled lookup's ``order_id=12345`` was taken for what the ticket must name."""
    from .invariants import _references

    spoiled = {"order_id": 12345}
    lookup = DecisionRow(seq=0, tool="lookup_order", args=spoiled, llm_call=1, generation=1)
    refused = CallRow(seq=0, key="r0:0", state="failed", result={"error": "invalid_arguments"},
                      remote_status="rejected", generation=1, confirm_generation=1,
                      effect="read")  # fmt: skip
    ticket = DecisionRow(seq=1, tool="file_ticket", llm_call=1, generation=1,
                         args={"order_id": "A-1001", "summary": "broken (#1)"})  # fmt: skip

    assert _references("r0", {0: lookup, 1: ticket}, {0: refused}) == []
