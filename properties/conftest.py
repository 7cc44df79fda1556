"""Fixtures of the property suite: its own PostgreSQL, one runner of each kind, the ci run.

The suite runs on a database of its own (``properties.server.SuiteDatabase``), whatever
``DATABASE_URL`` says: the ``db_crash`` event stops that server hard and starts it again.
Every example empties its runs (DELETE) instead of creating a database.

The ``ci`` exploration (the small scope and the machine, the suite's longest test) runs in
a process of its own from the suite's first test on (:mod:`properties.background`), on the
machine's other core; the tests that read it come last and wait for it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from agent_runtime.supervisor.supervision import Supervisor

from . import profiles as profiles  # registers dev, ci and nightly
from .background import Background
from .exploring import Exploration, explore
from .pool_runner import PoolRunner
from .profiles import active_profile
from .runners import InProcessRunner, ProcessRunner
from .server import SuiteDatabase

MACHINE = "test_crash_schedules_keep_every_invariant"  # reads the ci exploration under ci
BACKGROUND = pytest.StashKey[Background]()
# a selected test reads the ci exploration; the variants whose explorations are read
WANTED = pytest.StashKey[tuple[bool, list[str]]]()
VARIANT_TEST = "test_the_ci_profile_catches_a_broken_runtime"


def _reads_exploration(item: pytest.Item) -> bool:
    names = getattr(item, "fixturenames", ())
    return "ci_exploration" in names or (item.name == MACHINE and active_profile() == "ci")


def _variant_of(item: pytest.Item) -> str | None:
    """The broken runtime a selected variant test explores (under the ci profile)."""
    callspec = getattr(item, "callspec", None)
    if getattr(item, "originalname", "") != VARIANT_TEST or callspec is None:
        return None
    return str(callspec.params["variant"]) if active_profile() == "ci" else None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The tests that read the ci exploration last among the suite's (the rest keep their
    order); the explorations wanted in the background: the ci one if one of them runs, and
    each selected variant's."""
    ours = [i for i in items if i.nodeid.startswith("properties/")]
    if not ours:
        return
    last = [i for i in ours if _reads_exploration(i)]
    rest = [i for i in ours if not _reads_exploration(i)]
    start = items.index(ours[0])
    others = [i for i in items if not i.nodeid.startswith("properties/")]
    items[:] = others[:start] + rest + last + others[start:]
    variants = [v for v in map(_variant_of, ours) if v is not None]
    config.stash[WANTED] = (bool(last), variants)


def pytest_runtest_setup(item: pytest.Item) -> None:
    """The explorations start with the suite's first test (not the session's: the tests of
    ``tests/`` before it keep the machine to themselves)."""
    config = item.config
    main, variants = config.stash.get(WANTED, (False, []))
    wanted = (main or variants) and item.nodeid.startswith("properties/")
    if wanted and BACKGROUND not in config.stash:
        config.stash[BACKGROUND] = Background("ci", "ci", main=main, variants=variants)


def pytest_sessionfinish(session: pytest.Session) -> None:
    background = session.config.stash.get(BACKGROUND, None)
    if background is not None:
        background.stop()


@pytest.fixture(scope="session")
def suite_database() -> Iterator[SuiteDatabase]:
    database = SuiteDatabase()
    try:
        yield database
    finally:
        database.close()


@pytest.fixture(scope="session")
def inprocess_runner(suite_database: SuiteDatabase) -> Iterator[InProcessRunner]:
    runner = InProcessRunner(suite_database.url, server=suite_database)
    try:
        runner.warm()
        yield runner
    finally:
        runner.close()


@pytest.fixture(scope="session")
def process_runner(suite_database: SuiteDatabase) -> Iterator[ProcessRunner]:
    runner = ProcessRunner(suite_database.url, server=suite_database)
    try:
        runner.warm()
        yield runner
    finally:
        runner.close()


@pytest.fixture(scope="session")
def ci_exploration(request: pytest.FixtureRequest) -> Exploration:
    """The machine under the ``ci`` profile, once per session (deterministic): the
    background's (started at collection), else run here.

    A finding is saved under properties/failures/ like any other, for the replay.
    """
    background = request.config.stash.get(BACKGROUND, None)
    if background is not None:
        return background.result()
    runner: InProcessRunner = request.getfixturevalue("inprocess_runner")
    return explore(runner, profile="ci", name="ci")


@pytest.fixture
def explored(request: pytest.FixtureRequest) -> Callable[[InProcessRunner, Path], Exploration]:
    """A variant's exploration under the ci profile: the background's, else run here on
    ``runner`` (its failures saved under the given directory)."""
    background = request.config.stash.get(BACKGROUND, None)

    def exploration(runner: InProcessRunner, failures: Path) -> Exploration:
        name = runner.variant.name
        done = background.variant(name) if background is not None else None
        if done is not None:
            return done
        return explore(runner, profile="ci", name=name, failures_dir=failures)

    return exploration


@pytest.fixture(autouse=True)
def _quiet_runtime_logs(caplog: pytest.LogCaptureFixture) -> None:
    """Expected fences and stops log warnings by the thousand; keep reports readable."""
    caplog.set_level(logging.CRITICAL, logger="agent_runtime")


@pytest.fixture
def runner(suite_database: SuiteDatabase) -> Iterator[InProcessRunner]:
    """An in-process runner of the test's own (a slip planted in it dies with it)."""
    made = InProcessRunner(suite_database.url, server=suite_database)
    try:
        yield made
    finally:
        made.close()


@pytest.fixture(scope="module")
def bare_pool(suite_database: SuiteDatabase) -> Iterator[PoolRunner]:
    """A pool runner of the module's own, for checks that build their own supervisors of
    its world's class (the loop, the corners) rather than replay schedules."""
    made = PoolRunner(suite_database.url, server=suite_database)
    try:
        yield made
    finally:
        made.close()


@pytest.fixture
def planted(bare_pool: PoolRunner) -> Iterator[PoolRunner]:
    """``bare_pool`` for a test that plants a broken supervisor class in its world: the
    real one is put back after it."""
    try:
        yield bare_pool
    finally:
        bare_pool.world.supervisor_class = Supervisor
