"""The supervisor takes its runs back from workers that are alive but useless.

Hung: a worker of its own stopped (SIGSTOP: its heartbeat stops too) while it holds a run;
once the lease has run out on the database clock the supervisor kills it and hands the run
on. Stuck: a worker still beating whose tool never returns; once the run has made no
progress for ``--stuck-after`` seconds on the database clock, the same. The clock is moved,
never slept past; the only waits are bounded polls for something to have happened.
"""

from __future__ import annotations

import functools
import os
import re
import signal
from typing import Any

import pytest

from agent_runtime.store import clock, db
from agent_runtime.store.journal import Journal

from .fix_runtime import Agent, journal_rows
from .fix_supervisor import wait_for
from .test_plans import _generic_scans
from .test_supervisor import FAST, _all_done, _assert_each_step_once
from .test_workerpool import _alive, _owned_by, _started

HUNG = re.compile(r"worker-hung run=(\S+) pid=(\d+) lease_expired_ago=(\d+\.\d)s action=killed")
LOST = re.compile(r"worker-hung run=(\S+) pid=(\d+) run_lost_ago=\d+\.\ds action=killed")
STUCK = re.compile(
    r"worker-stuck run=(\S+) pid=(\d+) no_progress_for=(\d+\.\d)s stuck_after=60s action=killed"
)
JOURNAL_RUNS = 5000  # other runs in the journal, with 2 answers and 4 calls each


def _claims(conn: Any, run_id: str) -> list[dict[str, Any]]:
    return list(
        conn.execute(
            "SELECT generation, owner, reason FROM run_claims WHERE run_id = %s "
            "ORDER BY generation",
            (run_id,),
        ).fetchall()
    )


@pytest.mark.parametrize("spawn", ["pool", "fork", "exec"])
@pytest.mark.usefixtures("frozen_clock")
def test_workers_stopped_holding_runs_are_killed_once_their_leases_run_out_and_the_runs_finish(
    spawn: str, agent: Agent, conn: Any, mock_servers: Any, supervisors: Any
) -> None:
    mock_servers.set_model_faults(latency=0.4)  # every run is in flight when it is stopped
    runs = [f"stalled-{spawn}-{i}" for i in range(4)]
    for run_id in runs:
        Journal(conn).create_run(run_id)
    sup = supervisors(*FAST, "--max-workers", "2", "--spawn", spawn)
    wait_for("two workers on runs", lambda: len(sup.resumed()) == 2)
    held = dict(sup.resumed())
    for run_id, pid in held.items():
        wait_for(f"{run_id} adopted", functools.partial(_owned_by, conn, run_id, pid))
        os.kill(pid, signal.SIGSTOP)  # alive, holding its run and both slots, silent
    clock.advance(conn, 13)  # past both leases (12 s): nothing renewed them
    wait_for("both stopped workers killed", lambda: len(HUNG.findall(sup.text)) == 2)
    mock_servers.set_model_faults(latency=0)
    killed = {run_id: int(pid) for run_id, pid, _ in HUNG.findall(sup.text)}
    assert killed == held
    assert all(1.0 <= float(ago) <= 13.0 for _, _, ago in HUNG.findall(sup.text))
    for run_id, pid in held.items():
        wait_for(f"pid {pid} gone", lambda pid=pid: not _alive(pid))  # killed and reaped
        [first] = wait_for(f"{run_id} reaped", functools.partial(sup.exits, run_id))[:1]
        assert first == (run_id, -signal.SIGKILL)
    wait_for("every run done", lambda: _all_done(conn, runs))
    for run_id, pid in held.items():
        first, again = _claims(conn, run_id)  # handed on once, to a new worker
        assert (first["generation"], again["generation"]) == (1, 2)
        assert again["reason"] == "handed_back"
        assert f":{pid}:" not in again["owner"]
        [(_, successor)] = sup.resumed(run_id)[1:]
        assert successor != pid
    for run_id in runs:
        _assert_each_step_once(conn, mock_servers, run_id)
    if spawn == "pool":
        assert len(_started(sup)) >= 4  # both killed workers were replaced


@pytest.mark.usefixtures("frozen_clock")
def test_a_worker_whose_tool_never_returns_is_killed_after_the_stuck_bound_and_its_run_finishes(
    agent: Agent, conn: Any, mock_servers: Any, supervisors: Any
) -> None:
    # The first cloud request acts and its answer is held: the tool call does not return,
    # while the worker's heartbeat keeps its lease (120 s) alive.
    mock_servers.set_cloud_faults(drop_after=1, hang=90)
    Journal(conn).create_run("wedged")
    sup = supervisors(
        "--poll", "0.1", "--lease", "120", "--heartbeat", "3", "--stuck-after", "60",
        TOOL_TIMEOUT="120",
    )  # fmt: skip
    [(_, pid)] = wait_for("a worker on the run", lambda: sup.resumed("wedged"))
    wait_for("the server created", lambda: mock_servers.resources("wedged")["counts"]["servers"])
    assert [c["state"] for c in journal_rows(conn, "wedged")["calls"]] == ["intent"]
    clock.advance(conn, 30)  # some time without progress, the lease still renewed
    wait_for("a renewal after the move", lambda: _lease_left(conn, "wedged") > 100)
    assert "worker-stuck" not in sup.text and _alive(pid)
    clock.advance(conn, 31)  # 61 s without a journal write: past the bound
    [(run_id, killed, idle)] = wait_for("the stuck worker killed", lambda: STUCK.findall(sup.text))
    assert (run_id, int(killed)) == ("wedged", pid)
    assert 61.0 <= float(idle) < 90.0
    assert "worker-hung" not in sup.text  # its lease never ran out: it was beating
    wait_for("the run done", lambda: _all_done(conn, ["wedged"]))
    assert not _alive(pid)
    assert sup.exits("wedged")[0] == ("wedged", -signal.SIGKILL)
    assert len(sup.resumed("wedged")) == 2
    # resumed by its contract: the keyed create_server was sent again and answered as done
    assert journal_rows(conn, "wedged")["calls"][0]["remote_status"] == "already_done"
    _assert_each_step_once(conn, mock_servers, "wedged")


@pytest.mark.usefixtures("frozen_clock")
def test_a_stopped_worker_whose_run_another_claim_took_is_killed_one_lease_later(
    agent: Agent, conn: Any, mock_servers: Any, supervisors: Any
) -> None:
    """Another supervisor may claim an expired run before this one looks: its worker is
    then fenced, but stopped it would keep this supervisor's only slot for good."""
    mock_servers.set_model_faults(latency=0.4)
    Journal(conn).create_run("taken")
    sup = supervisors(*FAST, "--max-workers", "1")
    [(_, pid)] = wait_for("a worker on the run", lambda: sup.resumed("taken"))
    wait_for("the run adopted", functools.partial(_owned_by, conn, "taken", pid))
    os.kill(pid, signal.SIGSTOP)
    with conn.transaction():  # the lease runs out and a claim elsewhere takes the run at once
        clock.advance(conn, 13)
        assert Journal(conn).claim("taken", "elsewhere:1:other", 12.0) is not None
    mock_servers.set_model_faults(latency=0)
    # The supervisor has seen the run lost to its stopped worker: its one lease starts.
    wait_for("the run seen lost", lambda: f"worker-lost run=taken pid={pid} " in sup.text)
    assert "worker-hung" not in sup.text  # a fenced worker gets one lease to report
    clock.advance(conn, 13)  # one lease later (and past the other claim's lease)
    [(run_id, killed)] = wait_for("the worker killed", lambda: LOST.findall(sup.text))
    assert (run_id, int(killed)) == ("taken", pid)
    wait_for("the run done", lambda: _all_done(conn, ["taken"]))
    assert not _alive(pid)
    assert [c["generation"] for c in _claims(conn, "taken")] == [1, 2, 3]
    assert sup.resumed("taken")[1][1] != pid  # the slot went to a new worker
    _assert_each_step_once(conn, mock_servers, "taken")


def _lease_left(conn: Any, run_id: str) -> float:
    row = conn.execute(
        "SELECT extract(epoch FROM lease_expires_at - cr_now()) AS left FROM runs WHERE id = %s",
        (run_id,),
    ).fetchone()
    return float(row["left"])


def test_the_watch_reads_only_the_busy_workers_runs_by_their_keys(conn: Any) -> None:
    """The check a sweep makes costs the same on a journal of thousands of runs: each
    table is read through its primary key, in the plan the supervisor's connection keeps."""
    with conn.transaction():
        conn.execute(
            "INSERT INTO runs (id, status, owner, generation, lease_expires_at, llm_calls)"
            " SELECT 'old-' || r, 'running', 'w', 1, cr_now(), 2"
            " FROM generate_series(1, %(runs)s) r",
            {"runs": JOURNAL_RUNS},
        )
        conn.execute(
            "INSERT INTO model_answers (run_id, llm_call, message, generation)"
            " SELECT 'old-' || r, a, '{}', 1"
            " FROM generate_series(1, %(runs)s) r, generate_series(1, 2) a",
            {"runs": JOURNAL_RUNS},
        )
        conn.execute(
            "INSERT INTO tool_calls (run_id, seq, idem_key, state, generation)"
            " SELECT 'old-' || r, s, 'old-' || r || ':' || s, 'confirmed', 1"
            " FROM generate_series(1, %(runs)s) r, generate_series(0, 3) s",
            {"runs": JOURNAL_RUNS},
        )
    conn.execute("ANALYZE runs, model_answers, tool_calls")
    params = {"runs": ["old-7", "old-4000"]}
    for table in ("runs", "model_answers", "tool_calls"):
        scans = _generic_scans(conn, "held_runs", params, table)
        assert scans and all(s.startswith("Index") and "_pkey" in s for s in scans), scans
    rows = {r["id"]: r for r in db.run(conn, "held_runs", params)}
    assert set(rows) == {"old-7", "old-4000"} and rows["old-7"]["held_at"] == 1
