"""An operator's cancel fences like a claim: the cancelled worker's next journal write and
its next request with an effect are refused, and ``show`` names the call it had in flight.

The worker is paused at a step's gate while the operator cancels (in-process: the crash
point's action cancels and returns; with a real process: the worker stops itself with
SIGSTOP at the gate and is woken with SIGCONT after a ``cancel`` from the command line).
The remotes' own counters say whether anything reached them.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from agent_runtime.config import Settings
from agent_runtime.crash import CrashPlan
from agent_runtime.errors import EXIT_NOT_OWNER, LeaseLost
from agent_runtime.loop.worker import Worker
from agent_runtime.operator import cancel_run
from agent_runtime.operator.snapshot import read_history
from agent_runtime.operator.text import format_cancellation, format_history
from agent_runtime.store import db
from agent_runtime.store.journal import Journal
from examples.support import support_agent
from mock_remotes import Cloud, Model, Support, cloud_transport, model_transport, support_transport

from .fix_runtime import Agent, journal_rows
from .fix_supervisor import wait_for
from .operator_cli import cli

HOOKS = str(Path(__file__).with_name("hooks"))
TASK = "Order A-1001 arrived broken: the mug's handle came off in the box."


@pytest.fixture
def remotes(tmp_path: Path) -> Iterator[tuple[Cloud, Model]]:
    with Cloud(tmp_path / "cloud.sqlite3") as cloud:
        yield cloud, Model()


def _worker(conn: Any, cloud: Cloud, model: Model, crash: CrashPlan) -> Worker:
    return Worker.build(
        Journal(conn),
        Settings(cloud_url="http://cloud", model_url="http://model", tool_retries=0),
        model_transport=model_transport(model),
        cloud_transport=cloud_transport(cloud),
        crash=crash,
    )


def _cancelling(
    database_url: str, conn: Any, run_id: str, seen: dict[str, Any]
) -> Callable[..., None]:
    """A gate's action: the operator cancels while the worker waits there; the journal as
    the cancel left it is kept in ``seen``."""

    def cancel(*_: object) -> None:
        with db.connection(database_url) as other:
            cancel_run(other, run_id, "changed my mind")
        seen["journal"] = journal_rows(conn, run_id)

    return cancel


# The gate where the worker waits at step 1, and what reached the cloud under key <run>:1.
GATES = [
    ("before_decide", 0),  # step 1 was never decided: nothing to send
    ("after_intent", 0),  # intent durable, request not sent: the cancel keeps it unsent
    ("after_call", 1),  # the cloud acted before the cancel: that request is not "after"
]


@pytest.mark.parametrize(("point", "acted"), GATES)
def test_a_worker_cancelled_at_a_gate_has_its_next_write_and_request_refused(
    point: str, acted: int, conn: Any, database_url: str, remotes: tuple[Cloud, Model]
) -> None:
    cloud, model = remotes
    run_id = f"cf-{point}"
    seen: dict[str, Any] = {}
    cancel = _cancelling(database_url, conn, run_id, seen)
    worker = _worker(conn, cloud, model, CrashPlan(point=point, seq=1, action=cancel))
    try:
        with pytest.raises(LeaseLost, match=f"run {run_id} is no longer ours"):
            worker.run(run_id)
    finally:
        worker.close_clients()

    assert journal_rows(conn, run_id) == seen["journal"]  # nothing written after the cancel
    assert cloud.requests(f"{run_id}:1") == acted
    assert cloud.counts(run_id)["servers"] == 1 and cloud.counts(run_id)["databases"] == acted
    assert model.calls(run_id) == (1 if point == "before_decide" else 2)
    history = read_history(conn, run_id)
    view = history.to_json()["cancelled"]
    shown = format_history(history)
    assert view["generation"] == 1 and view["reason"] == "cancelled by operator: changed my mind"
    if point == "before_decide":
        assert view["in_flight"] == [] and view["decided"] == []
        assert "no tool call was in flight" in shown
        return
    (call,) = view["in_flight"]
    assert {k: call[k] for k in ("seq", "key", "tool", "effect", "state", "intent_by")} == {
        "seq": 1,
        "key": f"{run_id}:1",
        "tool": "create_database",
        "effect": "keyed",
        "state": "intent",
        "intent_by": 1,
    }
    assert f"in flight when cancelled: seq 1 create_database key {run_id}:1 (keyed" in shown
    assert f"look key {run_id}:1 up at the remote" in call["advice"]


def test_a_retry_after_a_transient_failure_is_not_sent_once_the_run_is_cancelled(
    conn: Any, database_url: str, tmp_path: Path
) -> None:
    run_id = "cf-retry"
    seen: dict[str, Any] = {}
    cancel = _cancelling(database_url, conn, run_id, seen)
    with Support(tmp_path / "desk.sqlite3") as desk:
        desk.set_faults(fail_before=1)  # the ticket's first attempt: 500, nothing happens
        worker = Worker.build(
            Journal(conn),
            Settings(model_url="http://model/v1"),
            agents=support_agent("http://support"),
            transports={"model": model_transport(Model()), "support": support_transport(desk)},
            sleep=cancel,  # the operator cancels while the worker waits out its backoff
        )
        try:
            with pytest.raises(LeaseLost, match="send seq=1 not written"):  # its start, fenced
                worker.run(run_id, input=TASK)
        finally:
            worker.close_clients()
        assert desk.tickets(run=run_id) == []  # the retry never reached the desk
        assert [a.answer for a in desk.answers(ref=f"{run_id}:1")] == ["injected_failure"]
    assert journal_rows(conn, run_id) == seen["journal"]
    (call,) = read_history(conn, run_id).to_json()["cancelled"]["in_flight"]
    assert (call["seq"], call["tool"], call["effect"], call["state"]) == (
        1,
        "file_ticket",
        "keyed",
        "intent",
    )


def test_the_cloud_clients_own_resend_after_a_500_is_not_sent_once_the_run_is_cancelled(
    conn: Any, database_url: str, remotes: tuple[Cloud, Model]
) -> None:
    cloud, model = remotes
    run_id = "cf-client-retry"
    seen: dict[str, Any] = {}
    cancel = _cancelling(database_url, conn, run_id, seen)
    cloud.set_faults(fail_before=1)  # the server's first attempt: 500, nothing happens
    worker = Worker.build(
        Journal(conn),
        Settings(cloud_url="http://cloud", model_url="http://model", tool_retries=2),
        model_transport=model_transport(model),
        cloud_transport=cloud_transport(cloud),
        sleep=cancel,  # the operator cancels while the client waits to send again
    )
    try:
        with pytest.raises(LeaseLost, match="a tool's retry after a wait"):
            worker.run(run_id)
    finally:
        worker.close_clients()
    assert cloud.requests(f"{run_id}:0") == 1  # the refused first attempt, and no other
    assert cloud.counts(run_id)["servers"] == 0
    assert journal_rows(conn, run_id) == seen["journal"]
    (call,) = read_history(conn, run_id).to_json()["cancelled"]["in_flight"]
    assert (call["seq"], call["tool"], call["state"]) == (0, "create_server", "intent")


def test_cancel_of_a_worker_stopped_before_its_send_leaves_the_cloud_untouched(
    agent: Agent, conn: Any, database_url: str, mock_servers: Any
) -> None:
    path = os.pathsep.join(p for p in (HOOKS, os.environ.get("PYTHONPATH")) if p)
    env = agent.env("cf-stopped", PYTHONPATH=path)
    env["CRASHRESUME_TEST_STOP_AT"] = "after_intent:1"  # the worker SIGSTOPs itself there
    worker = subprocess.Popen(
        [sys.executable, "-m", "agent_runtime", "run"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        wait_for("the worker to stop at after_intent", lambda: _stopped(worker.pid))
        before = journal_rows(conn, "cf-stopped")
        assert [c["state"] for c in before["calls"]] == ["confirmed", "intent"]
        cancelled = cli(database_url, "cancel", "cf-stopped", "--reason", "wrong order")
        assert cancelled.code == 0, cancelled.stderr
        assert "in flight when cancelled: seq 1 create_database key cf-stopped:1" in (
            cancelled.stdout
        )
    finally:
        worker.send_signal(signal.SIGCONT)
    out, _ = worker.communicate(timeout=60)
    assert worker.returncode == EXIT_NOT_OWNER, out
    assert "fenced run=cf-stopped generation=1" in out and "now_status=cancelled" in out
    unknown = httpx.get(f"{mock_servers.cloud_url}/v1/keys/cf-stopped:1", timeout=10)
    assert (unknown.status_code, unknown.json()["requests"]) == (404, 0)  # never sent
    assert mock_servers.resources("cf-stopped")["counts"]["databases"] == 0
    assert journal_rows(conn, "cf-stopped") == before
    shown = cli(database_url, "show", "cf-stopped", "--json").json()["cancelled"]
    assert [(c["seq"], c["state"]) for c in shown["in_flight"]] == [(1, "intent")]
    assert shown["owner"] is not None and shown["owner"].split(":")[1] == str(worker.pid)


def _stopped(pid: int) -> bool:
    with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
        return stat.read().rsplit(")", 1)[1].split()[0] == "T"


def test_cancel_says_what_it_left_in_flight(conn: Any, database_url: str) -> None:
    journal = Journal(conn)
    journal.create_run("cf-said")
    lease = journal.claim("cf-said", "another-host:4242:cafe0001", 12.0)
    assert lease is not None
    journal.record_decision(lease, 0, "create_server", {"name": "srv-1"})
    journal.record_intent(lease, 0)
    with db.connection(database_url) as other:
        said = format_cancellation(cancel_run(other, "cf-said"))
    assert "in flight when cancelled: seq 0 create_server key cf-said:0 (keyed" in said
    decided = "cf-decided"
    journal.create_run(decided)
    lease = journal.claim(decided, "another-host:4242:cafe0001", 12.0)
    assert lease is not None
    journal.record_decision(lease, 0, "create_server", {"name": "srv-1"})
    with db.connection(database_url) as other:
        said = format_cancellation(cancel_run(other, decided))
    assert "no tool call was in flight" in said and "seq 0 create_server was decided" in said
    journal.create_run("cf-never")
    with db.connection(database_url) as other:
        cancel_run(other, "cf-never")
    shown = format_history(read_history(conn, "cf-never"))
    assert "no worker had ever claimed the run" in shown and "no tool call was in flight" in shown
