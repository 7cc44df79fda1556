"""crashresume's conform, run against agents written with the runtime's public API.

``agent_runtime.conformance`` routes each tool call through ``ctx.effect`` by its effect
contract (keyed: under its key; checked and once: no key, so a second send is a second
effect; read: not an effect). The support agent of tests/agents.py must pass; one whose
check is blind, and a ``once`` agent without an operator or with a careless one, must be
reported for what they are. The remotes are the mock model and one mock support desk per
scenario (ticket ids are counters, and later arguments carry them), in process.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from agent_runtime.config import Settings
from agent_runtime.conformance import RuntimeSubject
from agent_runtime.operator.actions import resolve_call
from agent_runtime.store.journal import Journal
from agent_runtime.tools.agent import Agent
from crashresume import conform
from mock_remotes import Model, Support, model_transport, support_transport

from .agents import support, support_blind, support_once

JOBS = ["alpha", "beta"]
EFFECTS_PER_JOB = 2  # file_ticket and send_email; lookup_order is a read

Factory = Callable[..., Callable[[Any], RuntimeSubject]]


@pytest.fixture
def subjects(database_url: str, conn: Any, tmp_path: Path) -> Iterator[Factory]:
    desks: dict[str, Support] = {}
    model = Model()  # counts per run id, and run ids differ per scenario
    opened: list[RuntimeSubject] = []

    def factory(agent: Agent, operator: Any = None) -> Callable[[Any], RuntimeSubject]:
        def make_agent(ctx: Any) -> RuntimeSubject:
            if ctx.run_id not in desks:
                desks[ctx.run_id] = Support(tmp_path / f"desk-{ctx.run_id}.sqlite3")
            subject = RuntimeSubject(
                ctx,
                database_url,
                agent=agent,
                transports={
                    "model": model_transport(model),
                    "support": support_transport(desks[ctx.run_id]),
                },
                settings=Settings(
                    database_url=database_url, model_url="http://model/v1", retry_backoff=0.0
                ),
                operator=operator,
            )
            subject.desk = desks[ctx.run_id]  # type: ignore[attr-defined]
            opened.append(subject)
            return subject

        return make_agent

    yield factory
    for subject in opened:
        subject.close()
    for desk in desks.values():
        desk.close()


def _in_doubt(subject: RuntimeSubject, run_id: str) -> tuple[int, str]:
    (call,) = Journal(subject.conn).history(run_id).stranded()
    return call.seq, call.idem_key


def looks_in_the_mailbox(subject: RuntimeSubject, run_id: str) -> None:
    """An operator who checks the mailbox before deciding: confirm what went out, or redo."""
    seq, key = _in_doubt(subject, run_id)
    found = subject.desk.check(key)  # type: ignore[attr-defined]
    if found["delivered"]:
        resolve_call(subject.conn, run_id, seq, "confirm", result=found["first"])
    else:
        resolve_call(subject.conn, run_id, seq, "redo")


def always_redoes(subject: RuntimeSubject, run_id: str) -> None:
    """An operator who sends it again without looking."""
    seq, _ = _in_doubt(subject, run_id)
    resolve_call(subject.conn, run_id, seq, "redo")


def test_a_user_defined_support_agent_passes_conform(subjects: Factory) -> None:
    report = conform(subjects(support), inputs=JOBS)
    assert report.passed, str(report)
    assert report.baseline_effects == EFFECTS_PER_JOB * len(JOBS)
    assert len(report.scenarios) >= 2 * EFFECTS_PER_JOB * len(JOBS)  # before and after each


def test_the_support_agent_passes_with_a_second_crash_during_recovery(subjects: Factory) -> None:
    report = conform(subjects(support), inputs=["solo"], crashes=2)
    assert report.passed, str(report)


def test_a_checked_tool_whose_check_never_finds_anything_is_a_duplicate_effect(
    subjects: Factory,
) -> None:
    report = conform(subjects(support_blind), inputs=JOBS)
    assert not report.passed
    assert "duplicate_effect" in report.kinds()
    duplicated = [f for f in report.findings if f.kind == "duplicate_effect"]
    assert all("send_email" in f.message for f in duplicated), str(report)


def test_a_once_tool_in_doubt_stops_the_run_for_an_operator(subjects: Factory) -> None:
    report = conform(subjects(support_once), inputs=["solo"])
    assert not report.passed
    assert report.kinds() == {"resume_crashed"}  # parked, never sent twice
    assert all("NeedsAttention" in f.message for f in report.findings), str(report)


def test_a_once_tool_passes_with_an_operator_who_checks_the_mailbox(subjects: Factory) -> None:
    report = conform(subjects(support_once, looks_in_the_mailbox), inputs=JOBS)
    assert report.passed, str(report)


def test_an_operator_who_always_redoes_sends_twice_and_is_reported(subjects: Factory) -> None:
    report = conform(subjects(support_once, always_redoes), inputs=["solo"])
    assert not report.passed
    assert "duplicate_effect" in report.kinds()


def test_the_support_agent_passes_with_faults_at_every_effect(subjects: Factory) -> None:
    """A send that timed out after the desk acted, failed before it, or landed after the
    worker gave up: the checked send is checked by the next start, never before its
    request could land, and sent once (issue 21's in-flight case, as conform sees it)."""
    report = conform(subjects(support), inputs=JOBS, faults=["lost", "fail", "slow"])
    assert report.passed, str(report)
    assert {"run-slow-2", "run-lost-2"} <= set(report.scenarios)


def test_a_blind_check_is_found_by_a_lost_answer_too(subjects: Factory) -> None:
    report = conform(subjects(support_blind), inputs=["solo"], faults=["lost"])
    assert "run-lost-2" in {f.scenario for f in report.findings}, str(report)
