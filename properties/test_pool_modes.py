"""The supervisor's spawn modes, its pool kept whole, and its stop of stalled workers
(:mod:`properties.pool_modes`, :mod:`properties.pool_stall`): the real supervisor keeps
every check, and each check fails on a supervisor with the slip planted."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from agent_runtime.supervisor.supervision import Supervisor

from .pool_modes import mode_problems
from .pool_runner import PoolRunner
from .pool_stall import stall_problems
from .server import SuiteDatabase
from .violations import Violation


@pytest.fixture(scope="module")
def modes_runner(suite_database: SuiteDatabase) -> Iterator[PoolRunner]:
    runner = PoolRunner(suite_database.url, server=suite_database)
    try:
        yield runner
    finally:
        runner.close()


@pytest.fixture
def planted(modes_runner: PoolRunner) -> Iterator[PoolRunner]:
    try:
        yield modes_runner
    finally:
        modes_runner.world.supervisor_class = Supervisor


def _found(problems: list[Violation], kind: str) -> str:
    text = "\n".join(str(p) for p in problems)
    assert any(p.kind == kind for p in problems), f"no {kind}; found: {text or 'nothing'}"
    return text


def test_the_real_supervisor_keeps_its_modes_its_pool_and_its_stop(
    modes_runner: PoolRunner,
) -> None:
    assert mode_problems(modes_runner) == []
    assert stall_problems(modes_runner) == []
