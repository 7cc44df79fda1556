"""The supervisor with real processes: it heals, drains, fences and never doubles up.

Leases are expired by moving the database clock (agent_runtime.store.clock), never by
sleeping; the only waits are bounded polls for something to have happened.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from typing import Any

import pytest

from agent_runtime.errors import EXIT_NOT_OWNER, EXIT_USAGE
from agent_runtime.store import clock
from agent_runtime.store.journal import Journal

from .fix_runtime import Agent, journal_rows
from .fix_supervisor import wait_for

FAST = ("--poll", "0.1", "--lease", "12", "--heartbeat", "3")


def _status(conn: Any, run_id: str) -> str:
    row = conn.execute("SELECT status FROM runs WHERE id = %s", (run_id,)).fetchone()
    return str(row["status"]) if row else "missing"


def _all_done(conn: Any, run_ids: list[str]) -> bool:
    rows = conn.execute(
        "SELECT count(*) AS n FROM runs WHERE id = ANY(%s) AND status = 'done'", (run_ids,)
    ).fetchone()
    return bool(rows["n"] == len(run_ids))


def _assert_each_step_once(conn: Any, mock_servers: Any, run_id: str) -> None:
    resources = mock_servers.resources(run_id)
    assert resources["counts"] == {"servers": 1, "databases": 1, "dns_records": 1}, run_id
    rows = journal_rows(conn, run_id)
    assert [d["tool"] for d in rows["decisions"]] == [
        "create_server",
        "create_database",
        "create_dns_record",
        "done",
    ]
    assert [d["llm_call"] for d in rows["decisions"]] == [1, 2, 3, 4]  # none re-journaled
    sent = {r["key"]: r["args"] for r in resources["resources"]}
    assert sent == {f"{run_id}:{d['seq']}": d["args"] for d in rows["decisions"][:3]}


@pytest.mark.parametrize("seq", [0, 1, 2], ids=["server", "database", "dns"])
@pytest.mark.parametrize("phase", ["model", "cloud"])
def test_a_worker_killed_mid_step_is_resumed_at_once_and_finishes_once(
    phase: str, seq: int, agent: Agent, conn: Any, mock_servers: Any, supervisors: Any
) -> None:
    run_id = f"kill-{phase}-{seq}"
    if phase == "model":
        mock_servers.set_model_faults(latency=0.4)
    else:
        mock_servers.set_cloud_faults(latency=0.4)
    Journal(conn).create_run(run_id)
    sup = supervisors(*FAST)
    _, pid = wait_for("the first worker", lambda: sup.resumed(run_id))[0]
    if phase == "model":  # the model has the request for step seq and has not answered
        wait_for(f"model call {seq + 1}", lambda: mock_servers.calls(run_id) == seq + 1)
    else:  # the intent for step seq is durable and the request is in flight
        wait_for(
            f"intent {seq}",
            lambda: len(journal_rows(conn, run_id)["calls"]) == seq + 1,
        )
    os.kill(pid, signal.SIGKILL)
    # No clock is moved: the supervisor sees its own child die, not a lease run out.
    wait_for("the run to finish", lambda: _status(conn, run_id) == "done")
    assert (run_id, -signal.SIGKILL) in sup.exits(run_id)
    assert len(sup.resumed(run_id)) == 2
    _assert_each_step_once(conn, mock_servers, run_id)
    # The killed model call never answered; only that one question was asked again.
    assert mock_servers.calls(run_id) == 4 + (1 if phase == "model" else 0)


@pytest.mark.usefixtures("frozen_clock")
def test_runs_abandoned_before_it_started_are_all_drained(
    agent: Agent, conn: Any, mock_servers: Any, supervisors: Any
) -> None:
    journal = Journal(conn)
    crashed = [f"crashed-{i}" for i in range(4)]
    for i, run_id in enumerate(crashed):  # real agents killed at different points
        point = ("after_call", "after_decide", "after_intent", "before_decide")[i]
        assert agent.run(run_id, CRASH_AT=point, CRASH_SEQ=str(i % 3)).code == 1
    ghosts = [f"ghost-{i}" for i in range(12)]  # claimed by workers that vanished
    for run_id in ghosts:
        journal.create_run(run_id)
        assert journal.claim(run_id, "elsewhere:1:gone", 12.0) is not None
    never = [f"never-{i}" for i in range(8)]  # created, never started
    for run_id in never:
        journal.create_run(run_id)
    clock.advance(conn, 13)
    every = crashed + ghosts + never
    sup = supervisors(*FAST, "--max-workers", "3", "--once")
    assert sup.wait(120) == 0, sup.text
    assert _all_done(conn, every)
    assert sorted(r for r, _ in sup.resumed()) == sorted(every)
    for run_id in every:
        resources = mock_servers.resources(run_id)
        assert resources["counts"] == {"servers": 1, "databases": 1, "dns_records": 1}


@pytest.mark.usefixtures("frozen_clock")
def test_a_run_with_a_live_lease_is_left_alone(
    agent: Agent, conn: Any, mock_servers: Any, supervisors: Any
) -> None:
    journal = Journal(conn)
    journal.create_run("held")
    assert journal.claim("held", "elsewhere:1:alive", 12.0) is not None
    journal.create_run("free")
    sup = supervisors(*FAST, "--once")
    assert sup.wait(60) == 0, sup.text
    assert [r for r, _ in sup.resumed()] == ["free"]
    assert _status(conn, "held") == "running"


@pytest.mark.usefixtures("frozen_clock")
def test_the_zombie_that_wakes_after_its_run_was_stolen_changes_nothing(
    agent: Agent, conn: Any, mock_servers: Any, supervisors: Any
) -> None:
    mock_servers.set_cloud_faults(latency=0.5)
    zombie = subprocess.Popen(
        [sys.executable, "-m", "agent_runtime", "run"],
        env=agent.env("zombie"),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        # Step 1's intent is durable and its request is in flight: freeze the worker.
        wait_for("intent 1", lambda: len(journal_rows(conn, "zombie")["calls"]) == 2)
        zombie.send_signal(signal.SIGSTOP)
        mock_servers.set_cloud_faults(latency=0)
        clock.advance(conn, 13)  # past the frozen worker's lease
        sup = supervisors(*FAST, "--once")
        assert sup.wait(60) == 0, sup.text
        assert _status(conn, "zombie") == "done"
        before = (journal_rows(conn, "zombie"), mock_servers.resources("zombie"))
    finally:
        zombie.send_signal(signal.SIGCONT)
    out, _ = zombie.communicate(timeout=60)
    assert zombie.returncode == EXIT_NOT_OWNER, out
    assert "fenced run=zombie generation=1" in out or "stale_generation" in out
    after = (journal_rows(conn, "zombie"), mock_servers.resources("zombie"))
    assert after == before
    _assert_each_step_once(conn, mock_servers, "zombie")


def test_two_supervisors_never_run_two_workers_on_one_run(
    agent: Agent, conn: Any, mock_servers: Any, supervisors: Any
) -> None:
    journal = Journal(conn)
    runs = [f"shared-{i}" for i in range(24)]
    for run_id in runs:
        journal.create_run(run_id)
    mock_servers.set_cloud_faults(latency=0.02)
    first = supervisors(*FAST, "--max-workers", "4", "--once")
    second = supervisors(*FAST, "--max-workers", "4", "--once")
    assert first.wait(120) == 0, first.text
    assert second.wait(120) == 0, second.text
    assert _all_done(conn, runs)
    claimed = [r for r, _ in first.resumed()] + [r for r, _ in second.resumed()]
    assert sorted(claimed) == sorted(runs)  # each run started exactly once, by one of them
    assert first.resumed() and second.resumed()
    generations = conn.execute(
        "SELECT run_id, count(*) AS n FROM run_claims WHERE run_id = ANY(%s) GROUP BY run_id",
        (runs,),
    ).fetchall()
    assert {g["n"] for g in generations} == {1}


@pytest.mark.usefixtures("frozen_clock")
def test_a_killed_supervisors_orphans_finish_or_are_reclaimed(
    agent: Agent, conn: Any, mock_servers: Any, supervisors: Any
) -> None:
    journal = Journal(conn)
    runs = [f"orphan-{i}" for i in range(4)]
    for run_id in runs:
        journal.create_run(run_id)
    mock_servers.set_model_faults(latency=0.3)
    sup = supervisors(*FAST, "--max-workers", "4")
    wait_for("four workers", lambda: len(sup.resumed()) == 4)
    pids = dict(sup.resumed())
    sup.proc.kill()  # the supervisor dies; its workers live on, orphaned
    for run_id in runs[:2]:  # and two of the orphans die too
        os.kill(pids[run_id], signal.SIGKILL)
    sup.stop()
    # A new supervisor must not touch the two live orphans' runs while their leases hold.
    wait_for("the live orphans to finish", lambda: _all_done(conn, runs[2:]))
    mock_servers.set_model_faults(latency=0)
    assert {_status(conn, r) for r in runs[:2]} == {"running"}
    early = supervisors(*FAST, "--once")
    assert early.wait(60) == 0
    assert early.resumed() == []  # the dead orphans' leases are still live: hands off
    clock.advance(conn, 13)
    late = supervisors(*FAST, "--once")
    assert late.wait(60) == 0, late.text
    assert sorted(r for r, _ in late.resumed()) == sorted(runs[:2])
    assert _all_done(conn, runs)
    for run_id in runs:
        _assert_each_step_once(conn, mock_servers, run_id)


def test_a_run_that_keeps_failing_is_marked_failed_with_the_reason(
    agent: Agent, conn: Any, mock_servers: Any, supervisors: Any
) -> None:
    mock_servers.set_model_faults(malformed=1000)
    Journal(conn).create_run("garbage")
    # No backoff and no time limit: the attempts alone decide (tests/test_backoff_runs.py has
    # the rule with both).
    no_wait = ("--run-backoff", "0", "--run-backoff-cap", "0", "--give-up-after", "0")
    sup = supervisors(*FAST, "--max-attempts", "3", *no_wait, "--once")
    assert sup.wait(60) == 0, sup.text
    row = conn.execute("SELECT status, failure FROM runs WHERE id = 'garbage'").fetchone()
    assert row["status"] == "failed"
    assert "gave up after 3 attempts" in row["failure"] and "MalformedAnswer" in row["failure"]
    assert len(sup.resumed("garbage")) == 3
    assert mock_servers.calls("garbage") == 3
    assert journal_rows(conn, "garbage")["decisions"] == []
    stops = [ln for ln in sup.text.splitlines() if ln.startswith("ERROR")]
    assert len(stops) == 3 and all("stopped run=garbage" in ln for ln in stops)  # one each


def test_sigterm_stops_the_supervisor_and_hands_its_runs_back_at_once(
    agent: Agent, conn: Any, mock_servers: Any, supervisors: Any
) -> None:
    mock_servers.set_model_faults(latency=0.5)
    Journal(conn).create_run("interrupted")
    sup = supervisors(*FAST)
    wait_for("the worker", lambda: sup.resumed("interrupted"))
    assert sup.stop(signal.SIGTERM) == 0
    assert "supervisor-stopped" in sup.text
    row = conn.execute(
        "SELECT owner, lease_expires_at <= cr_now() AS free FROM runs WHERE id = 'interrupted'"
    ).fetchone()
    assert row["owner"] is None and row["free"]  # nobody has to wait out a lease
    mock_servers.set_model_faults(latency=0)
    again = supervisors(*FAST, "--once")
    assert again.wait(60) == 0
    assert _status(conn, "interrupted") == "done"


def test_the_heartbeat_renews_the_lease_while_a_step_is_blocked(
    agent: Agent, conn: Any, mock_servers: Any
) -> None:
    mock_servers.set_model_faults(latency=1.5)
    worker = subprocess.Popen(
        [sys.executable, "-m", "agent_runtime", "run"],
        env=agent.env("beating", LEASE="2", HEARTBEAT="0.2"),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for("the model call", lambda: mock_servers.calls("beating") == 1)
        seen: set[object] = set()

        def renewed_twice() -> bool:
            row = conn.execute("SELECT lease_expires_at FROM runs WHERE id = 'beating'").fetchone()
            seen.add(row["lease_expires_at"])
            return len(seen) >= 3 and mock_servers.calls("beating") == 1

        wait_for("two renewals during one model call", renewed_twice, timeout=1.4)
    finally:
        worker.kill()
        worker.wait()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--heartbeat", "12", "--lease", "12"), "must be shorter than the lease"),
        (("--poll", "-1"), "poll must be a positive number"),
        (("--lease", "-5", "--heartbeat", "1"), "lease must be a positive number"),
        (("--max-workers", "0"), "max_workers must be at least 1"),
        (("--stuck-after", "-1"), "stuck_after must be >= 0 seconds"),
    ],
)
def test_bad_supervisor_configuration_is_refused_clearly(
    args: tuple[str, ...], message: str, agent: Agent
) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "agent_runtime.supervisor", *args],
        env=agent.env("unused"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == EXIT_USAGE
    assert message in proc.stderr
    assert "Traceback" not in proc.stderr


def test_workers_can_be_fresh_interpreters_instead_of_forks(
    agent: Agent, conn: Any, mock_servers: Any, supervisors: Any
) -> None:
    journal = Journal(conn)
    runs = ["exec-0", "exec-1"]
    for run_id in runs:
        journal.create_run(run_id)
    sup = supervisors(*FAST, "--spawn", "exec", "--once")
    assert sup.wait(120) == 0, sup.text
    assert _all_done(conn, runs)
    for run_id in runs:
        _assert_each_step_once(conn, mock_servers, run_id)


def test_sigint_stops_the_supervisor_like_sigterm(
    agent: Agent, conn: Any, mock_servers: Any, supervisors: Any
) -> None:
    sup = supervisors(*FAST)
    wait_for("the supervisor to start", lambda: "supervisor lease=" in sup.text)
    assert sup.stop(signal.SIGINT) == 0
    assert "supervisor-stopped" in sup.text


def test_a_supervised_worker_owns_its_run_under_its_own_pid(
    agent: Agent, conn: Any, mock_servers: Any, supervisors: Any
) -> None:
    mock_servers.set_model_faults(latency=0.5)
    Journal(conn).create_run("adopted")
    sup = supervisors(*FAST)
    _, pid = wait_for("the worker", lambda: sup.resumed("adopted"))[0]

    def owner() -> str | None:
        row = conn.execute("SELECT owner FROM runs WHERE id = 'adopted'").fetchone()
        return row["owner"] if row["owner"] and f":{pid}:" in row["owner"] else None

    token = wait_for("the worker to adopt the lease", owner)
    claim = conn.execute("SELECT owner FROM run_claims WHERE run_id = 'adopted'").fetchone()
    assert claim["owner"] == token  # the audit trail names the worker, not its parent
    os.kill(pid, signal.SIGKILL)
    mock_servers.set_model_faults(latency=0)
    wait_for("the run to finish", lambda: _status(conn, "adopted") == "done")
    assert len(sup.resumed("adopted")) == 2  # released at once despite the adopted token


@pytest.mark.usefixtures("frozen_clock")
def test_a_crash_point_a_supervised_run_never_reaches_is_said_once(
    conn: Any, mock_servers: Any, supervisors: Any
) -> None:
    """Under a supervisor every run takes CRASH_AT/CRASH_SEQ; a run that ends done without
    reaching it (step 9 of a three-step run) says so, as the CLI's exit 7 does (issue 22)."""
    Journal(conn).create_run("short")
    sup = supervisors(*FAST, "--once", CRASH_AT="after_call", CRASH_SEQ="9")
    assert sup.wait(120) == 0, sup.text
    assert _all_done(conn, ["short"])
    said = [line for line in sup.lines if "crash-not-reached" in line]
    assert len(said) == 1, sup.text
    assert "run=short point=after_call seq=9 steps=3" in said[0]
