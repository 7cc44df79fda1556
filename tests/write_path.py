"""Shared by the test_write_path_* modules: a provisioning worker on in-process mocks, a
claimed run, and a cursor that notes every statement it sends.
"""

from __future__ import annotations

from typing import Any, ClassVar

import psycopg

from agent_runtime.config import Settings
from agent_runtime.loop.worker import Worker
from agent_runtime.store import db
from agent_runtime.store.journal import Journal
from agent_runtime.store.records import Lease
from agent_runtime.tools.provisioning import agent as provisioning
from mock_remotes import Cloud, Model, cloud_transport, model_transport

STEPS = 3  # the provisioning agent's tool steps


def provisioning_worker(conn: db.Connection, model: Model, cloud: Cloud) -> Worker:
    """A worker of the provisioning agent over in-process transports to ``model``, ``cloud``."""
    return Worker.build(
        Journal(conn),
        Settings(model_url="http://model/v1"),
        agents=provisioning,
        transports={"model": model_transport(model), "cloud": cloud_transport(cloud)},
        sleep=lambda seconds: None,
    )


def started_run(journal: Journal, run_id: str) -> Lease:
    """A new run ``run_id``, claimed for a minute by ``owner-1``."""
    journal.create_run(run_id)
    lease = journal.claim(run_id, "owner-1", 60.0)
    assert lease is not None
    return lease


class Counting(psycopg.Cursor[Any]):
    """A cursor that notes every statement it sends (the server still runs them all)."""

    sent: ClassVar[list[str]] = []

    def execute(self, query: Any, params: Any = None, **kw: Any) -> Any:
        Counting.sent.append(query.as_string(self) if hasattr(query, "as_string") else query)
        return super().execute(query, params, **kw)
