"""A run no supervisor serves is visible: the supervisor names it once, ``runs`` and ``show``
say which agent it waits for and how long it has waited.

A supervisor takes only the runs of its own agents; which supervisors run, with which
agents, is recorded nowhere. So a supervisor names each run of another agent that has
waited two polls since it became claimable, once (``unserved run=... agent=...``), and the
operator's views show the agent and the wait. Time moves through ``cr_now()``.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from agent_runtime.config import Settings
from agent_runtime.store import clock, db
from agent_runtime.store.journal import Journal
from agent_runtime.supervisor.main import Supervisor

from .agents import support
from .operator_cli import cli

REPO = Path(__file__).resolve().parents[1]
POLL = 3.0  # seconds: the default
SUPERVISOR = (sys.executable, "-m", "agent_runtime.supervisor")


def _named(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.getMessage().startswith("unserved ")]


def test_a_supervisor_names_each_waiting_run_of_another_agent_once(
    conn: db.Connection, database_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="agent_runtime")
    clock.freeze(conn)
    journal = Journal(conn)
    journal.create_run("lonely", "provisioning")  # nobody here serves it
    journal.create_run("mine", "support", "Order A-1001 arrived broken")
    supervisor = Supervisor(database_url, Settings(poll=POLL), agents=[support])
    try:
        watch = supervisor.unserved
        assert watch.look(supervisor.conn) == []  # just created: a server would take it soon
        clock.advance(conn, 2 * POLL)
        assert watch.look(supervisor.conn) == ["lonely"]
        assert watch.look(supervisor.conn) == []  # once per run, not every poll
        clock.advance(conn, 600)
        assert watch.look(supervisor.conn) == []
        (line,) = _named(caplog)
        assert line == (
            "unserved run=lonely agent=provisioning status=pending waited=6.0s serves=support"
        )
        cli(database_url, "cancel", "lonely")  # it stops waiting: forgotten, named if again
        assert watch.look(supervisor.conn) == []
        assert watch.named == set()
    finally:
        supervisor.conn.close()


@pytest.mark.usefixtures("frozen_clock")
def test_a_real_supervisor_logs_an_unserved_run_once_over_many_polls(
    conn: db.Connection, database_url: str
) -> None:
    Journal(conn).create_run("lonely", "provisioning")
    clock.advance(conn, 60)  # it has waited a minute
    env = {k: v for k, v in os.environ.items() if k not in ("CRASH_AT", "CRASH_SEQ", "RUN_ID")}
    env["DATABASE_URL"] = database_url
    proc = subprocess.Popen(
        [*SUPERVISOR, "--agent", "tests.agents:support", "--poll", "0.2"],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        time.sleep(3.0)  # real time: fifteen polls of a real supervisor; no lease or wait expires
    finally:
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    named = [line for line in (out + err).splitlines() if " unserved " in f" {line}"]
    assert len(named) == 1, err
    assert named[0].startswith("WARNING unserved run=lonely agent=provisioning status=pending")
    assert named[0].endswith(" serves=support")
    assert "Traceback" not in err


def test_runs_and_show_say_which_agent_a_waiting_run_waits_for_and_how_long(
    conn: Any, database_url: str
) -> None:
    clock.freeze(conn)
    journal = Journal(conn)
    journal.create_run("lonely", "support", "Order A-1001 arrived broken")
    clock.advance(conn, 1)
    journal.create_run("later", "support", "Order A-1002 arrived broken")
    clock.advance(conn, 126)
    journal.create_run("fresh", "provisioning")
    clock.advance(conn, 6)
    done = journal.claim("fresh", "w:1:x", 12.0)
    assert done is not None
    journal.finish(done, "ok")

    listed = cli(database_url, "runs")
    assert listed.code == 0, listed.stderr
    assert (
        "waiting for a worker of agent 'support': 2 run(s), the longest lonely for 2.2m; a "
        "supervisor takes only the runs of its own agents (--agent): if this grows, none "
        "serves 'support'"
    ) in listed.stdout
    assert "agent 'provisioning'" not in listed.stdout  # done: it waits for nobody
    as_json = {r["id"]: r for r in cli(database_url, "runs", "--json").json()["runs"]}
    assert as_json["lonely"]["waiting_since"] is not None
    assert as_json["fresh"]["waiting_since"] is None

    shown = cli(database_url, "show", "lonely")
    assert shown.code == 0, shown.stderr
    assert (
        "never claimed; waiting 2.2m for a worker of agent 'support': only a supervisor "
        "started with an --agent named 'support', or `python -m agent_runtime run --agent "
        "MODULE:ATTR --run-id lonely`, takes it"
    ) in shown.stdout
