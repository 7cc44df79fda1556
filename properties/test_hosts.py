"""A worker on another host: its owner token names that host, so no claimer here proves it
dead by its pid (``lease.owner_is_dead``), and the ``claim_truth`` check says so. Run r2's
workers are such workers (``pilots.FOREIGN_RUN``) wherever a schedule uses r2; the small
scope's ``elsewhere`` story kills one and restarts its run."""

from __future__ import annotations

import pytest

from agent_runtime.loop import claiming, lease

from .pilots import ELSEWHERE, on_another_host, owner_of
from .planting import caught_with_edit
from .runners import InProcessRunner
from .scope import story

ELSEWHERE_STORY = story("provisioning", "elsewhere", "", 0)


def test_run_r2s_workers_name_another_host() -> None:
    assert owner_of("w1", 123, "r2").startswith(f"{ELSEWHERE}:123:")
    assert on_another_host(owner_of("w1", 123, "r2"))
    assert not on_another_host(owner_of("w1", 123, "r0"))
    assert not lease.owner_is_dead(owner_of("w1", 2**22 + 1, "r2"))  # no such pid, anywhere
    assert lease.owner_is_dead(owner_of("w1", 2**22 + 1, "r0"))


def test_an_owner_on_another_host_is_never_proved_dead_here(
    runner: InProcessRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``owner_is_dead``'s host test as its ``!=`` -> ``is`` mutant (8c5bce48) has it:
    never true, so a killed worker of another host is taken for dead by its pid."""
    old = "or parts[0] != host_identity() or"
    edit = (lease, old, old.replace("!=", "is"))
    found = caught_with_edit(
        runner,
        ELSEWHERE_STORY,
        monkeypatch,
        edit,
        take="owner_is_dead",
        put=(claiming, "owner_is_dead"),
    )
    assert "[claim_truth] run r2" in found and "ran on another host" in found
