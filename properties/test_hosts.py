"""A worker on another host: its owner token names that host, so no claimer here proves it
dead by its pid (``lease.owner_is_dead``), and the ``claim_truth`` check says so. Run r2's
workers are such workers (``pilots.FOREIGN_RUN``) wherever a schedule uses r2, on two
hosts whose names sort before and after this one's; the small scope's ``elsewhere`` story
kills one of each and restarts its run each time."""

from __future__ import annotations

import pytest

from agent_runtime.hostid import host_identity
from agent_runtime.loop import claiming, lease

from .pilots import ELSEWHERE, on_another_host, owner_of
from .planting import caught_with_edit
from .runners import InProcessRunner
from .scope import story

ELSEWHERE_STORY = story("provisioning", "elsewhere", "", 0)


def test_run_r2s_workers_name_another_host() -> None:
    assert owner_of("w1", 123, "r2").startswith(f"!{ELSEWHERE}:123:")
    assert owner_of("w2", 123, "r2").startswith(f"~{ELSEWHERE}:123:")
    assert owner_of("w2", 123, "r2").split(":")[0] > host_identity()
    assert owner_of("w1", 123, "r2").split(":")[0] < host_identity()
    assert on_another_host(owner_of("w1", 123, "r2"))
    assert not on_another_host(owner_of("w1", 123, "r0"))
    assert not lease.owner_is_dead(owner_of("w1", 2**22 + 1, "r2"))  # no such pid, anywhere
    assert lease.owner_is_dead(owner_of("w1", 2**22 + 1, "r0"))


@pytest.mark.parametrize("compare", ["is", "<", ">"])
def test_an_owner_on_another_host_is_never_proved_dead_here(
    runner: InProcessRunner, monkeypatch: pytest.MonkeyPatch, compare: str
) -> None:
    """``owner_is_dead``'s host test as its mutants have it: ``is`` (8c5bce48) never true,
    and ``<``, ``>`` (1d61b81a) true for one of the two other hosts, whose names sort
    before and after this one's: a killed worker of another host is taken for dead by
    its pid."""
    old = "or parts[0] != host_identity() or"
    edit = (lease, old, old.replace("!=", compare))
    found = caught_with_edit(
        runner,
        ELSEWHERE_STORY,
        monkeypatch,
        edit,
        take="owner_is_dead",
        put=(claiming, "owner_is_dead"),
    )
    assert "[claim_truth] run r2" in found and "ran on another host" in found
