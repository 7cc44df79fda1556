"""Fixtures of the property suite: one runner of each kind per session, and the ci run.

The database is the session's ``database_url`` (tests/fix_db.py); every example
empties its runs (DELETE) instead of creating a database.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from . import profiles as profiles  # registers dev, ci and nightly
from .machine import Exploration, explore
from .runners import InProcessRunner, ProcessRunner


@pytest.fixture(scope="session")
def inprocess_runner(database_url: str) -> Iterator[InProcessRunner]:
    runner = InProcessRunner(database_url)
    try:
        runner.baseline()
        yield runner
    finally:
        runner.close()


@pytest.fixture(scope="session")
def process_runner(database_url: str) -> Iterator[ProcessRunner]:
    runner = ProcessRunner(database_url)
    try:
        runner.baseline()
        yield runner
    finally:
        runner.close()


@pytest.fixture(scope="session")
def ci_exploration(inprocess_runner: InProcessRunner) -> Exploration:
    """The machine under the ``ci`` profile, once per session (deterministic).

    A finding is saved under properties/failures/ like any other, for the replay.
    """
    return explore(inprocess_runner, profile="ci", name="ci")


@pytest.fixture(autouse=True)
def _quiet_runtime_logs(caplog: pytest.LogCaptureFixture) -> None:
    """Expected fences and stops log warnings by the thousand; keep reports readable."""
    caplog.set_level(logging.CRITICAL, logger="agent_runtime")
