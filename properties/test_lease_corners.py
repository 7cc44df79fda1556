"""Whether an owner is dead where the suite's world never asks it
(``properties/lease_corners.py``): it holds, and each slip of ``owner_is_dead`` and
``_is_zombie`` that outlived every schedule until 2026-12-07 is caught."""

from __future__ import annotations

import pytest

from agent_runtime.loop import lease

from .lease_corners import check_owners
from .planting import plant_python

EPERM = "except PermissionError:\n        return False"
PROC = "except (OSError, IndexError):\n        return False"
OTHER_USER = "a live owner another user runs was called"
HIDDEN = "where /proc is hidden"


def test_an_owner_is_dead_only_when_proved_so() -> None:
    assert check_owners() == []


@pytest.mark.parametrize(
    ("where", "old", "new", "said"),
    [
        ("owner_is_dead", EPERM, EPERM.replace("PermissionError", "KeyError"),
         f"{OTHER_USER} neither"),
        ("owner_is_dead", EPERM, EPERM.replace("False", "True"), f"{OTHER_USER} dead"),
        ("_is_zombie", '[0] == "Z"', '[0] >= "Z"', "stopped by a debugger was called dead"),
        ("_is_zombie", PROC, PROC.replace("OSError", "KeyError"), f"raised) {HIDDEN}"),
        ("_is_zombie", PROC, PROC.replace("False", "True"), f"called dead {HIDDEN}"),
    ],
)  # fmt: skip
def test_a_slip_of_the_death_proof_is_caught(
    monkeypatch: pytest.MonkeyPatch, where: str, old: str, new: str, said: str
) -> None:
    planted = plant_python(monkeypatch, lease, old, new)
    monkeypatch.setattr(lease, where, getattr(planted, where))
    assert said in "\n".join(check_owners())
