"""A worker refused its run ends with the refusal the run's state names: a parked run's is
``NeedsAttention`` (exit 6), not the plain ``RunUnavailable`` (exit 5) a live lease or a
final run gets, so an operator's script can tell "resolve it" from "leave it"."""

from __future__ import annotations

import pytest

from agent_runtime.loop import claiming, worker

from .events import Event
from .planting import caught_with_edit
from .runners import InProcessRunner
from .scope import story

# the once call's intent without a confirm: the restart parks the run, the sweep leaves it
# alone, and a second restart is refused it
PARKED = (*story("once", "crash", "after_intent", 2), Event(op="restart", run=0))


def test_a_parked_run_is_refused_as_needing_attention(
    runner: InProcessRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``claim_run``'s ``== "needs_attention"`` as its ``>`` mutant (08a53275) has it."""
    old = 'refusal = NeedsAttention if run.status == "needs_attention" else RunUnavailable'
    edit = (claiming, old, old.replace("==", ">"))
    found = caught_with_edit(
        runner, PARKED, monkeypatch, edit, take="claim_run", put=(worker, "claim_run")
    )
    assert "stopped with RunUnavailable: run r0 is needs_attention" in found, found
