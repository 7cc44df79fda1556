"""The operator's ``runs`` list and ``cancel``, against a real PostgreSQL.

``runs`` shows each run's owner, lease and counts and filters them by status;
``cancel`` is final and idempotent, and a worker cancelled mid-run stops at its next
write without changing anything. Commands run as real processes; time moves through
``cr_now()``'s skew, never by sleeping.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent_runtime.config import Settings
from agent_runtime.crash import CrashPlan
from agent_runtime.errors import EXIT_NOT_OWNER, EXIT_USAGE, LeaseLost
from agent_runtime.loop.worker import Worker
from agent_runtime.operator import cancel_run
from agent_runtime.store import clock, db
from agent_runtime.store.journal import Journal
from mock_remotes import Cloud, Model, cloud_transport, model_transport

from .fix_runtime import SERVER
from .operator_cli import ELSEWHERE, claimed, cli

# -- runs -----------------------------------------------------------------------------------


@pytest.mark.usefixtures("frozen_clock")
def test_runs_lists_owner_lease_counts_and_filters_by_status(conn: Any, database_url: str) -> None:
    journal = Journal(conn)
    journal.create_run("a-pending")
    busy = claimed(journal, "b-running", ELSEWHERE)
    journal.record_decision(busy, 0, "create_server", dict(SERVER))
    journal.record_confirm(busy, journal.record_intent(busy, 0), {"id": "i-1"}, "created")
    journal.record_decision(busy, 1, "create_database", {"name": "db-2"})
    journal.record_intent(busy, 1)
    done = claimed(journal, "c-done", ELSEWHERE)
    journal.record_decision(done, 0, "done", {})
    journal.finish(done)
    journal.create_run("d-cancelled")
    cancel_run(conn, "d-cancelled", "not needed")

    table = cli(database_url, "runs")
    assert table.code == 0, table.stderr
    lines = table.stdout.splitlines()
    assert lines[0].split()[:6] == ["RUN", "STATUS", "GEN", "STEPS", "LLM", "DOUBT"]
    row = next(ln for ln in lines if ln.startswith("b-running"))
    assert ELSEWHERE in row and "expires " in row
    assert lines[-2] == "4 runs"
    assert lines[-1].startswith("waiting for a worker of agent 'provisioning': 1 run(s), the ")

    running = cli(database_url, "runs", "--status", "running", "--json").json()
    (b,) = running["runs"]
    assert (b["id"], b["generation"], b["steps_confirmed"], b["in_doubt"], b["llm_calls"]) == (
        "b-running",
        1,
        1,
        1,
        2,
    )
    assert b["owner"] == ELSEWHERE and b["lease_live"] is True and b["failure"] is None
    final = cli(database_url, "runs", "--status", "done,cancelled", "--json").json()
    assert sorted(r["id"] for r in final["runs"]) == ["c-done", "d-cancelled"]
    assert next(r for r in final["runs"] if r["id"] == "d-cancelled")["failure"] == (
        "cancelled by operator: not needed"
    )
    both = cli(database_url, "runs", "--status", "pending", "--status", "done", "--json").json()
    assert sorted(r["id"] for r in both["runs"]) == ["a-pending", "c-done"]
    limited = cli(database_url, "runs", "--limit", "2").stdout.splitlines()
    more = next(ln for ln in limited if ln.startswith("showing 2 runs, more follow"))
    after = more.split("--after ")[1].split()[0]
    rest = cli(database_url, "runs", "--limit", "2", "--after", after).stdout.splitlines()
    assert "2 runs" in rest and not any(ln.startswith("showing") for ln in rest)
    shown = [ln.split()[0] for ln in limited[1:3] + rest[1:3]]
    assert shown == [ln.split()[0] for ln in lines[1:5]]  # the same runs, in the same order

    clock.advance(conn, 13)
    row = next(ln for ln in cli(database_url, "runs").stdout.splitlines() if "b-run" in ln)
    assert "expired " in row and " ago)" in row

    bad = cli(database_url, "runs", "--status", "sleeping")
    assert bad.code == EXIT_USAGE and "unknown status sleeping" in bad.stderr


def test_runs_on_an_empty_journal_says_so(conn: Any, database_url: str) -> None:
    out = cli(database_url, "runs")
    assert (out.code, out.stdout.strip()) == (0, "no runs yet")
    assert cli(database_url, "runs", "--json").json() == {"now": None, "next": None, "runs": []}


# -- cancel ---------------------------------------------------------------------------------


@pytest.fixture
def in_process(tmp_path: Path) -> Iterator[tuple[Cloud, Model]]:
    with Cloud(tmp_path / "cloud.sqlite3") as cloud:
        yield cloud, Model()


def test_a_worker_cancelled_mid_run_stops_at_its_next_write_and_changes_nothing(
    conn: Any, database_url: str, in_process: tuple[Cloud, Model]
) -> None:
    cloud, model = in_process

    def cancel_now(point: str, seq: int) -> None:  # the operator acts while the worker waits
        with db.connection(database_url) as other:
            cancel_run(other, "c1", "changed my mind")

    worker = Worker.build(
        Journal(conn),
        Settings(cloud_url="http://cloud", model_url="http://model", tool_retries=0),
        model_transport=model_transport(model),
        cloud_transport=cloud_transport(cloud),
        crash=CrashPlan(point="after_decide", seq=1, action=cancel_now),
    )
    try:
        with pytest.raises(LeaseLost, match="intent seq=1 not written"):
            worker.run("c1")
    finally:
        worker.decider.close()

    history = Journal(conn).history("c1")
    assert sorted(history.decisions) == [0, 1]  # seq 1 was decided before the cancel
    assert [(c.seq, c.state) for c in history.calls.values()] == [(0, "confirmed")]
    assert cloud.counts("c1") == {"servers": 1, "databases": 0, "dns_records": 0}
    run = Journal(conn).require_run("c1")
    assert (run.status, run.owner, run.failure) == (
        "cancelled",
        None,
        "cancelled by operator: changed my mind",
    )
    shown = cli(database_url, "show", "c1").stdout
    assert "cancelled at " in shown and "so it will never be called" in shown


@pytest.mark.usefixtures("frozen_clock")
def test_cancel_from_the_command_line_is_final_and_idempotent(conn: Any, database_url: str) -> None:
    journal = Journal(conn)
    lease = claimed(journal, "c2", ELSEWHERE)
    journal.record_decision(lease, 0, "create_server", dict(SERVER))
    journal.record_intent(lease, 0)

    first = cli(database_url, "cancel", "c2", "--reason", "demo over")

    assert first.code == 0, first.stderr
    assert "run c2 cancelled (was running, generation 1, held by another-host" in first.stdout
    assert "left in doubt, never to be re-sent: c2:0" in first.stdout
    with pytest.raises(LeaseLost):
        journal.renew(lease, 12.0)  # the heartbeat notices too
    again = cli(database_url, "cancel", "c2", "--json")
    assert again.code == 0 and again.json()["already_cancelled"] is True
    shown = cli(database_url, "show", "c2", "--json").json()
    assert "the run is cancelled, so nothing will re-send under c2:0" in shown["in_doubt"][0]
    refused = cli(database_url, "resolve", "c2")
    assert refused.code == EXIT_NOT_OWNER and "stay in doubt" in refused.stderr

    done = claimed(journal, "c3", ELSEWHERE)
    journal.record_decision(done, 0, "done", {})
    journal.finish(done)
    late = cli(database_url, "cancel", "c3")
    assert late.code == EXIT_NOT_OWNER and "run c3 is done" in late.stderr
