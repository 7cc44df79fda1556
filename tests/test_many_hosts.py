"""Three hosts, one database: supervisors that share a journal and a host that vanishes.

Each "host" is a supervisor in its own process group with its own ``CRASHRESUME_HOST``, so
its owner tokens name it as a separate machine would. What must hold: every run finishes
with each effect once; a run held by a host that vanished is never taken by a proof of
death from another host (only its own host can prove that), only when its lease runs out;
and every claim names the host that made it. The clock is frozen, so a lease runs out when
the test moves the clock and never because the machine was slow.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from typing import Any

import pytest

from agent_runtime.errors import EXIT_NOT_OWNER, EXIT_USAGE
from agent_runtime.hostid import host_identity
from agent_runtime.loop.lease import owner_is_dead
from agent_runtime.store import clock
from agent_runtime.store.journal import Journal

from .fix_runtime import Agent
from .fix_supervisor import wait_for
from .test_supervisor import FAST, _all_done, _assert_each_step_once

HOSTS = ("host-a", "host-b", "host-c")
RUNS = [f"hosts-{i:02d}" for i in range(12)]


def _holders(conn: Any) -> dict[str, str]:
    """run -> the host named by its live owner token."""
    rows = conn.execute(
        "SELECT id, owner FROM runs WHERE id = ANY(%s) AND owner IS NOT NULL", (RUNS,)
    ).fetchall()
    return {r["id"]: r["owner"].split(":")[0] for r in rows}


@pytest.mark.usefixtures("frozen_clock")
def test_three_hosts_share_one_journal_and_a_vanished_hosts_runs_wait_for_their_leases(
    agent: Agent, conn: Any, mock_servers: Any, supervisors: Any
) -> None:
    journal = Journal(conn)
    for run_id in RUNS:
        journal.create_run(run_id)
    mock_servers.set_model_faults(latency=1.0)  # runs last long enough to be held
    started = {
        host: supervisors(*FAST, "--max-workers", "2", new_session=True, CRASHRESUME_HOST=host)
        for host in HOSTS
    }

    def all_hold() -> dict[str, str] | None:
        held = _holders(conn)
        return held if set(held.values()) >= {*HOSTS} else None

    held = wait_for("every host to hold a run", all_hold)
    assert set(held.values()) <= set(HOSTS), held  # every token names its host, none another

    # host-a vanishes: its supervisor and its workers die at once, mid-step
    gone = started["host-a"]
    os.killpg(gone.proc.pid, signal.SIGKILL)
    gone.stop(0)
    orphaned = sorted(r for r, h in _holders(conn).items() if h == "host-a")
    assert orphaned, "host-a held runs when it vanished"
    others = [r for r in RUNS if r not in orphaned]
    wait_for("the other hosts to finish the rest", lambda: _all_done(conn, others), 180)
    mock_servers.set_model_faults(latency=0)

    # From another host the dead owner's pid proves nothing: its lease must run out first.
    elsewhere = agent.run(orphaned[0], CRASHRESUME_HOST="host-b")
    assert elsewhere.code == EXIT_NOT_OWNER, elsewhere.out
    assert {h for r, h in _holders(conn).items() if r in orphaned} == {"host-a"}
    # host-a itself comes back: there the pid is provably gone, and the run is taken at once
    back = agent.run(orphaned[0], CRASHRESUME_HOST="host-a")
    assert back.code == 0, back.out

    clock.advance(conn, 13)  # past every lease host-a held
    wait_for("the vanished host's runs to be swept", lambda: _all_done(conn, RUNS), 180)
    for sup in (started["host-b"], started["host-c"]):
        assert sup.stop() == 0, sup.text

    for run_id in RUNS:
        _assert_each_step_once(conn, mock_servers, run_id)
    claims = conn.execute(
        "SELECT run_id, owner, previous_owner, reason FROM run_claims WHERE run_id = ANY(%s)"
        " ORDER BY run_id, generation",
        (RUNS,),
    ).fetchall()
    for c in claims:
        assert c["owner"].split(":")[0] in HOSTS, c
        if c["reason"] == "owner_dead":  # a proof of death comes from the dead owner's host
            assert c["owner"].split(":")[0] == c["previous_owner"].split(":")[0], c
    taken = {c["run_id"]: c["reason"] for c in claims if c["previous_owner"]}
    assert taken[orphaned[0]] == "owner_dead"
    assert {taken[r] for r in orphaned[1:]} <= {"expired"}
    assert all(r in taken for r in orphaned)


@pytest.mark.parametrize("bad", ["a:b", "two words", "x" * 256, "tab\there"])
def test_a_host_identity_no_token_can_carry_is_refused_at_start(agent: Agent, bad: str) -> None:
    with pytest.raises(Exception, match="CRASHRESUME_HOST"):
        host_identity({"CRASHRESUME_HOST": bad})
    refused = agent.run("hosts-bad", CRASHRESUME_HOST=bad)
    assert refused.code == EXIT_USAGE, refused.out
    assert "CRASHRESUME_HOST" in refused.out and "Traceback" not in refused.out


def test_the_identity_defaults_to_the_hostname_and_the_variable_names_it() -> None:
    assert host_identity({}) == os.uname().nodename
    assert host_identity({"CRASHRESUME_HOST": "rack4-node17"}) == "rack4-node17"


def test_a_dead_owner_is_proved_only_on_its_own_host_adopted_or_not(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pid = subprocess.Popen([sys.executable, "-c", "pass"])
    pid.wait()  # reaped: its pid names no process now
    monkeypatch.setenv("CRASHRESUME_HOST", "host-a")
    worker = f"host-a:{pid.pid}:0badc0de"
    claimed = f"{worker}:run-7"  # the supervisor's claim, not yet adopted by its worker
    assert owner_is_dead(worker) and owner_is_dead(claimed)
    monkeypatch.setenv("CRASHRESUME_HOST", "host-b")
    assert not owner_is_dead(worker) and not owner_is_dead(claimed)
