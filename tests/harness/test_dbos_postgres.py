"""crashresume.adapters.dbos on PostgreSQL: a system database per scenario, made and dropped."""

from __future__ import annotations

from typing import Any

import pytest

from crashresume import Context, SimulatedCrash, UsageError, conform
from crashresume._context import ScenarioLog

from .subjects import at

pytest.importorskip("dbos", reason="the DBOS adapter needs the dbos extra")

import psycopg

from crashresume.adapters._dbos_databases import IDENTIFIER_BYTES, PostgresDatabases
from crashresume.adapters.dbos import WorkflowSubject, workflow_factory

from .test_dbos_adapter import checkout, checkout_unkeyed

MODES = ["inprocess", "process"]


def databases_of(url: str, factory: Any) -> set[str]:
    base = factory.databases.base
    with psycopg.connect(url, autocommit=True) as server:
        rows = server.execute("SELECT datname FROM pg_database").fetchall()
    return {name.removeprefix(base) for (name,) in rows if name.startswith(base)}


@pytest.mark.parametrize("mode", MODES)
def test_a_dbos_workflow_on_postgres_passes_and_every_scenario_database_is_dropped(
    mode: str, database_url: str
) -> None:
    with workflow_factory(checkout, database_url=database_url) as make_agent:
        workers = 2 if mode == "process" else 1
        report = conform(make_agent, inputs=["o-1"], mode=mode, crashes=2, workers=workers)

        assert report.passed, str(report)
        assert report.baseline_effects == 2
        assert "run-1-then-before-1" in report.scenarios  # a crash while DBOS recovered run-1
        # Each scenario's database went when its last start completed; the template stays.
        assert databases_of(database_url, make_agent) == {"template"}

    assert databases_of(database_url, make_agent) == set()


def test_a_step_without_a_key_is_a_duplicate_effect_on_postgres_too(database_url: str) -> None:
    with workflow_factory(checkout_unkeyed, database_url=database_url) as make_agent:
        report = conform(make_agent, ["o-1"], mode="process")

    # Dying after the charge, before DBOS checkpointed its step: recovery charges again.
    assert at(report.findings) == {("run-1", "duplicate_effect")}


def test_a_start_that_did_not_complete_keeps_its_database_for_the_resume(
    database_url: str,
) -> None:
    databases = PostgresDatabases(database_url)
    try:
        ctx = Context("run-1", ScenarioLog())
        subject = WorkflowSubject(ctx, checkout, databases=databases)
        subject.__exit__(SimulatedCrash, SimulatedCrash(), None)  # the start died
        assert databases.name("run-1") in names(database_url)  # kept for the resume
        with WorkflowSubject(ctx, checkout, databases=databases):
            pass  # the resume completed: it was the scenario's last start
        assert databases.name("run-1") not in names(database_url)
    finally:
        databases.close()
    assert not {name for name in names(database_url) if name.startswith(databases.base)}


def names(url: str) -> set[str]:
    with psycopg.connect(url, autocommit=True) as server:
        return {name for (name,) in server.execute("SELECT datname FROM pg_database")}


def test_a_long_run_id_gets_a_database_name_postgres_can_hold() -> None:
    databases = PostgresDatabases("postgresql://localhost/postgres", prefix="My App")
    long = "run-1-then-before-2-then-3-then-before-4-then-5-then-before-6-then-7"

    name = databases.name(long)

    assert len(name.encode()) <= IDENTIFIER_BYTES
    assert name.startswith(databases.base) and databases.base.startswith("my_app_")
    assert name != databases.name(long + "-then-8")
    assert databases.name("run-2") == databases.base + "run_2"


@pytest.mark.parametrize("where", [{}, {"directory": "x", "database_url": "postgresql://"}])
def test_a_factory_needs_exactly_one_kind_of_system_database(where: dict[str, str]) -> None:
    with pytest.raises(UsageError, match=r"needs directory= .* or database_url="):
        workflow_factory(checkout, **where)
