"""A dead owner's pid proves it dead whatever its order to the claimer's.

In-process, the claimer is the suite's own process and every token names a process the
suite started later: the claimer's pid is always the lowest, so ``owner_is_dead``'s "that
is me" test could compare by order (``pid < os.getpid()``, ``<=``: b6a86349, 783af8eb)
and call every dead owner with a lower pid alive. With processes, a restart's worker is
younger than the one it takes the run from (as a restarted supervisor is in production),
and a process pilot that was reaped is ``gone``: ``claim_truth`` refuses a ``forced``
claim of it. The mutation driver runs these stories for ``lease`` and ``claiming``
(``properties/mutation/processstage.py``).
"""

from __future__ import annotations

import pytest

from agent_runtime.loop import claiming, lease

from .events import Event
from .mutation.processstage import STORIES
from .planting import failure, plant_python
from .runners import InProcessRunner, ProcessRunner
from .scope_stories import held


@pytest.mark.parametrize("new", ["if pid < os.getpid():", "if pid <= os.getpid():"])
def test_a_claim_that_orders_pids_calls_a_dead_older_owner_alive(
    process_runner: ProcessRunner, monkeypatch: pytest.MonkeyPatch, new: str
) -> None:
    assert [failure(process_runner, events) for events in STORIES] == [""] * len(STORIES)
    planted = plant_python(monkeypatch, lease, "if pid == os.getpid():", new)
    monkeypatch.setattr(claiming, "owner_is_dead", planted.owner_is_dead)  # forked: inherited

    found = [failure(process_runner, events) for events in STORIES[:2]]

    for each in found:
        assert "[claim_truth] run r0: generation 2's claim fenced" in each
        assert "though its process is gone" in each


def test_a_probe_that_signals_a_live_owner_is_caught(
    process_runner: ProcessRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``os.kill(pid, 0)`` asks; ``os.kill(pid, 1)`` (5aba7327) hangs the live owner up,
    and a restart that outpaces a live worker probes it."""
    outpaced = STORIES[-1]
    assert failure(process_runner, outpaced) == ""
    planted = plant_python(monkeypatch, lease, "os.kill(pid, 0)", "os.kill(pid, 1)")
    monkeypatch.setattr(claiming, "owner_is_dead", planted.owner_is_dead)

    found = failure(process_runner, outpaced)

    assert "[worker] run r0: w1 did not answer a beat while it waited at a gate" in found


def test_a_zombie_whose_name_holds_a_parenthesis_is_proved_dead(
    runner: InProcessRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An in-process worker's stand-in is named ``stand-in (w)``: a killed worker's zombie
    shows ``(stand-in (w)) Z`` in its stat, and a probe that took the state after the
    first ``)`` (``rsplit(")", 2)``, 9c514b25) called it alive: the operator's list said
    its owner lives (and a restart would have fenced a dead owner out as ``forced``)."""
    killed = (Event(op="start", run=0), *held("held_killed", 0))
    assert failure(runner, killed) == ""
    old = 'rsplit(")", 1)'
    planted = plant_python(monkeypatch, lease, old, old.replace("1", "2"))
    monkeypatch.setattr(lease, "_is_zombie", planted._is_zombie)  # owner_is_dead's global

    found = failure(runner, killed)

    assert "[owner_view] run r0 step 0: after w1 ended (its process gone)" in found
    assert "the operator's list says owner_gone=False" in found
