"""The supervisor's Prometheus endpoint, scraped while a real supervisor runs real workers
against a real journal: what it says is checked against the journal and the mocks' own
counters, not against the code that counts.

Leases are expired by moving the frozen database clock, never by sleeping.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import threading
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from agent_runtime.errors import EXIT_USAGE
from agent_runtime.observe.journalstats import EFFECTS, READING, STATUSES
from agent_runtime.operator import cancel_run
from agent_runtime.store import clock
from agent_runtime.store.journal import Journal

from .fix_runtime import Agent
from .fix_supervisor import wait_for

FAST = ("--poll", "0.1", "--lease", "12", "--heartbeat", "3")
PORT_LINE = re.compile(r"metrics address=127\.0\.0\.1 port=(\d+)")
Sample = tuple[str, tuple[tuple[str, str], ...]]


def scrape(port: int) -> dict[Sample, float]:
    """Every sample of ``/metrics``, by name and labels."""
    text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def claims_by_reason(conn: Any) -> dict[str, int]:
    rows = conn.execute("SELECT reason, count(*) AS n FROM run_claims GROUP BY reason")
    return {r["reason"]: r["n"] for r in rows.fetchall()}


def _parked(journal: Journal, run_id: str) -> None:
    """A run parked for an operator: a 'once' call in doubt at seq 0."""
    journal.create_run(run_id)
    lease = journal.claim(run_id, "elsewhere:3:gone", 60.0)
    assert lease is not None
    journal.record_decision(lease, 0, "create_server", {"name": "srv-1"})
    journal.record_intent(lease, 0, "once")
    journal.park(lease, "a once call in doubt")


@pytest.mark.usefixtures("frozen_clock")
def test_a_scrape_during_a_supervised_run_agrees_with_the_journal(
    agent: Agent, conn: Any, mock_servers: Any, supervisors: Any
) -> None:
    journal = Journal(conn)
    for run_id in ("m-ghost", "m-exhausted"):  # claimed by workers that vanished
        journal.create_run(run_id)
        assert journal.claim(run_id, "elsewhere:1:gone", 12.0) is not None
    clock.advance(conn, 13)
    assert journal.claim("m-exhausted", "elsewhere:2:gone", 12.0) is not None  # attempt 2
    clock.advance(conn, 13)
    _parked(journal, "m-parked")
    for run_id in ("m-plain", "m-kill", "m-cancel"):
        journal.create_run(run_id)
    before = claims_by_reason(conn)
    mock_servers.set_model_faults(latency=0.5)
    sup = supervisors(
        *FAST,
        *("--max-workers", "4", "--max-attempts", "2", "--give-up-after", "10"),
        *("--metrics-port", "0"),
    )
    port = int(wait_for("the metrics port", lambda: PORT_LINE.search(sup.text))[1])

    # Mid-run: the operator cancels a run while its worker waits on the model (the write
    # of its answer is fenced), and another worker is killed in its second model call.
    wait_for("m-cancel's model call", lambda: mock_servers.calls("m-cancel") == 1)
    cancel_run(conn, "m-cancel", "metrics test")
    during = scrape(port)
    busy = during[("agent_runtime_pool_busy_workers", ())]
    assert 1 <= busy <= during[("agent_runtime_pool_workers", ())]
    wait_for("m-kill's second model call", lambda: mock_servers.calls("m-kill") == 2)
    _, pid = sup.resumed("m-kill")[0]
    os.kill(pid, signal.SIGKILL)

    done = ("m-plain", "m-kill", "m-ghost")
    wait_for(
        "the runs to settle",
        lambda: (
            all(journal.require_run(r).status == "done" for r in done) and sup.exits("m-cancel")
        ),
    )
    got = scrape(port)

    rows = conn.execute("SELECT status, count(*) AS n FROM runs GROUP BY status").fetchall()
    statuses = {r["status"]: r["n"] for r in rows}
    for status in STATUSES:
        assert got[("agent_runtime_runs", (("status", status),))] == statuses.get(status, 0)
    assert got[("agent_runtime_runs_parked", ())] == statuses["needs_attention"] == 1
    rows = conn.execute(
        "SELECT effect, count(*) AS n FROM tool_calls WHERE state = 'intent' GROUP BY effect"
    ).fetchall()
    doubt = {r["effect"]: r["n"] for r in rows}
    assert doubt == {"once": 1}
    for effect in EFFECTS:
        assert got[("agent_runtime_calls_in_doubt", (("effect", effect),))] == doubt.get(effect, 0)

    after = claims_by_reason(conn)
    made = {r: after[r] - before.get(r, 0) for r in after if after[r] > before.get(r, 0)}
    assert made == {"first": 3, "expired": 1, "handed_back": 1}  # the ghost, the killed
    counted = {
        dict(labels)["reason"]: value
        for (name, labels), value in got.items()
        if name == "agent_runtime_claims_total"
    }
    assert counted == made
    assert got[("agent_runtime_takeovers_total", ())] == made["expired"]
    gave_up = conn.execute("SELECT count(*) FROM runs WHERE failure LIKE 'gave up%'").fetchone()
    assert got[("agent_runtime_give_ups_total", ())] == gave_up["count"] == 1
    assert got[("agent_runtime_fenced_writes_total", ())] == 1  # the cancelled worker
    assert journal.require_run("m-cancel").status == "cancelled"

    # Every step that completed, once: a confirmed call's, or the final answer's (the
    # killed step and the cancelled one never completed). Every model call that answered:
    # the mock's count, less the one the kill cut off.
    steps = conn.execute(
        "SELECT count(*) FROM decisions d WHERE d.run_id LIKE 'm-%%' AND (d.tool = 'done' "
        "OR EXISTS (SELECT 1 FROM tool_calls t WHERE (t.run_id, t.seq) = (d.run_id, d.seq) "
        "AND t.state = 'confirmed' AND t.remote_status <> 'operator'))"
    ).fetchone()
    assert got[("agent_runtime_step_seconds_count", ())] == steps["count"] == 12
    asked = sum(mock_servers.calls(r) for r in (*done, "m-cancel"))
    assert got[("agent_runtime_model_call_seconds_count", ())] == asked - 1 == 13
    assert got[("agent_runtime_journal_up", ())] == 1
    assert got[("agent_runtime_pool_busy_workers", ())] == 0
    assert sup.stop() == 0


def _refused(agent: Agent, *args: str, **env: str) -> str:
    proc = subprocess.run(
        [sys.executable, "-m", "agent_runtime.supervisor", *args],
        env={**agent.env("unused"), **env},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == EXIT_USAGE, proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    return lines[0]


@pytest.mark.parametrize(
    ("args", "env", "message"),
    [
        (("--metrics-port", "http"), {}, "--metrics-port must be a port number"),
        (("--metrics-port", "70000"), {}, "from 0 to 65535, got '70000'"),
        ((), {"METRICS_PORT": "-1"}, "METRICS_PORT must be a port number"),
    ],
)
def test_a_bad_metrics_port_is_refused_in_one_line(
    args: tuple[str, ...], env: dict[str, str], message: str, agent: Agent
) -> None:
    assert message in _refused(agent, *args, **env)


def test_a_metrics_port_in_use_is_refused_in_one_line(agent: Agent) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        line = _refused(agent, "--metrics-port", str(port))
    assert f"--metrics-port {port}: cannot listen on 127.0.0.1" in line


def test_the_asgi_app_mounted_in_another_server_reads_the_same_journal(
    database_url: str, conn: Any
) -> None:
    from fastapi import FastAPI
    from fastapi.testclient import TestClient

    from agent_runtime.observe.metrics import asgi_app

    journal = Journal(conn)
    for run_id in ("asgi-1", "asgi-2"):
        journal.create_run(run_id)
    app = FastAPI()
    app.mount("/metrics", asgi_app(database_url))
    with TestClient(app) as client:
        text = client.get("/metrics/").text
    got = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }
    pending = conn.execute("SELECT count(*) FROM runs WHERE status = 'pending'").fetchone()
    assert got[("agent_runtime_runs", (("status", "pending"),))] == pending["count"] >= 2
    assert got[("agent_runtime_journal_up", ())] == 1


def test_a_fork_waits_for_a_scrape_reading_the_journal() -> None:
    """The supervisor forks pool workers while its metrics thread may be reading the
    journal (and logging): a child forked then would inherit that thread's locks held
    forever. A fork therefore waits until the read is over."""
    forked = threading.Event()

    def fork() -> None:
        pid = os.fork()
        if pid == 0:
            os._exit(0)
        os.waitpid(pid, 0)
        forked.set()

    with READING:  # a scrape in the middle of its read
        thread = threading.Thread(target=fork)
        thread.start()
        assert not forked.wait(0.5), "a fork went ahead during a scrape's read"
    assert forked.wait(30)
    thread.join()
