"""Every crash point, at the first step and a later one, with real processes.

The first process must die with exit 1 exactly at the named point (what is
durable then is asserted), the second must finish the run; afterwards the cloud
holds one resource per key, the model was re-asked only where the seed says it
must be, and what the cloud received is what the journal decided.
"""

from __future__ import annotations

from typing import Any

import pytest

from agent_runtime.crash import CRASH_POINTS

from .fix_runtime import Agent, journal_rows

CRASH_FREE_MODEL_CALLS = 4  # three tools, then "done"


def _durable_expectation(point: str, seq: int) -> tuple[int, int, str | None]:
    """(decisions, tool_calls, state of the call at seq) right after dying at point."""
    if point in ("before_decide", "after_decide_before_journal"):
        return seq, seq, None
    if point in ("after_decide", "before_intent"):
        return seq + 1, seq, None
    if point in ("after_intent", "after_call"):
        return seq + 1, seq + 1, "intent"
    return seq + 1, seq + 1, "confirmed"


@pytest.mark.parametrize("seq", [0, 2], ids=["first-step", "later-step"])
@pytest.mark.parametrize("point", CRASH_POINTS)
def test_a_run_killed_at_any_point_finishes_with_each_effect_once(
    point: str, seq: int, agent: Agent, conn: Any, mock_servers: Any
) -> None:
    run_id = f"t-{point}-{seq}"
    first = agent.run(run_id, CRASH_AT=point, CRASH_SEQ=str(seq))
    assert first.code == 1, first.out
    assert f"CRASH_AT={point} seq={seq}" in first.out

    decisions, calls, state = _durable_expectation(point, seq)
    rows = journal_rows(conn, run_id)
    assert len(rows["decisions"]) == decisions, rows
    assert len(rows["calls"]) == calls, rows
    if state is not None:
        assert rows["calls"][seq]["state"] == state
    acted = {r["key"] for r in mock_servers.resources(run_id)["resources"]}
    # The remote acted for every step before seq, and for seq itself only past the call.
    expect_acted = seq + (1 if point in ("after_call", "after_confirm") else 0)
    assert acted == {f"{run_id}:{i}" for i in range(expect_acted)}
    asked = mock_servers.calls(run_id)
    assert asked == seq + (0 if point == "before_decide" else 1)

    second = agent.run(run_id)
    assert second.code == 0, second.out
    assert second.lines("done") and "steps=3 llm_calls=4" in second.lines("done")[0]

    resources = mock_servers.resources(run_id)
    assert resources["counts"] == {"servers": 1, "databases": 1, "dns_records": 1}
    assert sorted(r["key"] for r in resources["resources"]) == [f"{run_id}:{i}" for i in range(3)]
    re_asked = 1 if point == "after_decide_before_journal" else 0
    assert mock_servers.calls(run_id) == CRASH_FREE_MODEL_CALLS + re_asked

    rows = journal_rows(conn, run_id)
    sent = {r["key"]: r["args"] for r in resources["resources"]}
    journaled = {
        f"{run_id}:{d['seq']}": d["args"] for d in rows["decisions"] if d["tool"] != "done"
    }
    assert sent == journaled
    assert [c["state"] for c in rows["calls"]] == ["confirmed"] * 3
    if point == "after_call":
        confirmed = second.lines("confirmed")
        assert f"seq={seq}" in confirmed[0] and "remote=already_done" in confirmed[0]
    if point in ("after_decide", "before_intent"):
        replayed = second.lines("replayed")
        assert replayed and f"seq={seq}" in replayed[0]
        assert not [ln for ln in second.lines("decided") if f"seq={seq} " in ln]
