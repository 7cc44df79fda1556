"""A parallel answer's later calls are the deciding worker's own: never logged as replayed.

``replayed`` tells an operator that a restart read a decision back instead of asking the
model; the second call of an answer that proposed two is acted on by the worker that just
journaled it, so it must not say so, while a restart that acts on it still does.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from agent_runtime.config import Settings
from agent_runtime.crash import CrashPlan, InjectedCrash, raise_crash
from agent_runtime.loop.worker import Worker
from agent_runtime.store import db
from agent_runtime.store.journal import Journal
from agent_runtime.tools.provisioning import agent as provisioning
from mock_remotes import Cloud, Model, cloud_transport, model_transport

PARALLEL = dataclasses.replace(provisioning, protocol="chat", model="mock-provisioner-parallel")


def _worker(conn: db.Connection, model: Model, cloud: Cloud, crash: CrashPlan) -> Worker:
    return Worker.build(
        Journal(conn),
        Settings(model_url="http://model/v1"),
        agents=PARALLEL,
        transports={"model": model_transport(model), "cloud": cloud_transport(cloud)},
        crash=crash,
        sleep=lambda seconds: None,
    )


def _replayed(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.getMessage().startswith("replayed ")]


def test_the_second_call_of_a_parallel_answer_is_not_logged_as_replayed(
    conn: db.Connection, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level("INFO", logger="agent_runtime")
    model = Model()
    with Cloud(tmp_path / "cloud.sqlite3") as cloud:
        crash_free = _worker(conn, model, cloud, CrashPlan())
        crash_free.run("together")
        crash_free.close_clients()
        decisions = Journal(conn).history("together").decisions
        assert decisions[1].llm_call == decisions[2].llm_call  # one answer, two calls
        assert _replayed(caplog) == []

        crashing = CrashPlan(point="after_confirm", seq=1, action=raise_crash)
        first = _worker(conn, model, cloud, crashing)
        with pytest.raises(InjectedCrash):
            first.run("split")
        first.close_clients()
        restart = _worker(conn, model, cloud, CrashPlan())
        outcome = restart.run("split", takeover=True)
        restart.close_clients()
    (line,) = _replayed(caplog)
    assert line.startswith("replayed run=split seq=2 tool=create_dns_record")
    assert outcome.llm_calls == 3 and model.calls("split") == 3  # seq 2 was not asked again
