"""crashresume's conform, run against the reference runtime itself.

Every cloud call of the runtime goes through ``ctx.effect`` (see
agent_runtime.conformance): the harness crashes the runtime right before and
right after the remote acts, restarts it, and judges. The real runtime must
pass; runtimes with a guarantee removed must be reported.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent_runtime.conformance import RuntimeSubject
from agent_runtime.loop.worker import Worker
from crashresume import conform
from mock_remotes import Cloud, Model, cloud_transport, model_transport
from properties.variants.workers import CarryOnWorker, FreshKeyWorker

JOBS = ["alpha", "beta"]


@pytest.fixture
def subjects(database_url: str, conn: Any, tmp_path: Path) -> Iterator[Any]:
    clouds: dict[str, Cloud] = {}
    model = Model()  # counts per run id, and run ids differ per scenario
    opened: list[RuntimeSubject] = []

    def factory(worker_class: type[Worker]) -> Any:
        def make_agent(ctx: Any) -> RuntimeSubject:
            # Per-scenario remote: its ids ("i-0000001") are counters, and later steps'
            # arguments carry them, so scenarios must not share one.
            if ctx.run_id not in clouds:
                clouds[ctx.run_id] = Cloud(tmp_path / f"cloud-{ctx.run_id}.sqlite3")
            subject = RuntimeSubject(
                ctx,
                database_url,
                cloud_transport(clouds[ctx.run_id]),
                model_transport(model),
                worker_class=worker_class,
            )
            opened.append(subject)
            return subject

        return make_agent

    yield factory
    for subject in opened:
        subject.close()
    for cloud in clouds.values():
        cloud.close()


def test_the_reference_runtime_passes_conform(subjects: Any) -> None:
    report = conform(subjects(Worker), inputs=JOBS)
    assert report.passed, str(report)
    # 3 tool calls per job: every boundary, before and after, was a scenario.
    assert report.baseline_effects == 3 * len(JOBS)
    assert len(report.scenarios) >= 2 * 3 * len(JOBS)


def test_the_reference_runtime_passes_with_a_second_crash_during_recovery(
    subjects: Any,
) -> None:
    report = conform(subjects(Worker), inputs=["solo"], crashes=2)
    assert report.passed, str(report)


def test_a_runtime_that_resends_under_a_fresh_key_is_reported(subjects: Any) -> None:
    report = conform(subjects(FreshKeyWorker), inputs=JOBS)
    assert not report.passed
    assert "duplicate_effect" in report.kinds()


def test_a_runtime_that_skips_intent_resolution_is_reported(subjects: Any) -> None:
    report = conform(subjects(CarryOnWorker), inputs=JOBS)
    assert not report.passed
    assert report.kinds() & {"effect_lost", "resume_diverged", "resume_crashed"}


def test_the_reference_runtime_passes_conform_with_faults_at_every_effect(
    subjects: Any,
) -> None:
    """A timeout after the cloud acted, a failure before it acted, a request landing after
    the caller gave up: at the effect boundary these are what the cloud client meets, and
    it retries them itself under the same key, then stops the run resumably
    (RemoteUnavailable); the restart re-sends under the key and is answered
    already_done. Nothing is duplicated or lost (issue 25)."""
    report = conform(subjects(Worker), inputs=JOBS, faults=["lost", "fail", "slow"])
    assert report.passed, str(report)
    assert any(s.startswith("run-lost-") for s in report.scenarios)
