"""The supervisor's pool of long-lived workers, with real processes and a real database.

A pool worker keeps one connection (and with it its prepared statements) from run to
run; one killed mid-run is replaced at once and its run resumed in the replacement; a
pool worker dies with its supervisor's pipe; SIGTERM stops every worker, busy or idle.
Nothing sleeps to expire a lease: the supervisor frees a dead worker's run itself.
"""

from __future__ import annotations

import functools
import multiprocessing
import os
import re
import signal
import threading
from pathlib import Path
from typing import Any

import pytest

from agent_runtime.config import Settings
from agent_runtime.errors import EXIT_DONE
from agent_runtime.store import db
from agent_runtime.store.journal import Journal
from agent_runtime.supervisor.workerpool import WorkerSpec, serve
from mock_remotes import Cloud, Model, cloud_transport, model_transport

from .agents import provisioning_parallel
from .fix_runtime import Agent
from .fix_supervisor import SupervisorProcess, wait_for
from .recording import Recording
from .test_supervisor import FAST, _assert_each_step_once, _status

STARTED = re.compile(r"worker-started pid=(\d+)")
WORKER_APP = "agent_runtime"  # the application_name of a worker's own connection


def _started(sup: SupervisorProcess) -> list[int]:
    """The pids of the pool workers the supervisor started, in order."""
    return [int(m[1]) for m in map(STARTED.search, list(sup.lines)) if m]


def _children(pid: int) -> set[int]:
    """The live processes whose parent is ``pid`` (read from /proc)."""
    found = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[1]) == pid and fields[0] != "Z":
            found.add(int(stat.parent.name))
    return found


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _worker_backends(conn: Any) -> set[int]:
    """The server pids of the workers' own connections: opened after this test's own
    (not an earlier test's leftover), under the workers' name (the supervisor's and a
    heartbeat's have names of their own)."""
    rows = conn.execute(
        "SELECT pid FROM pg_stat_activity WHERE application_name = %s "
        "AND datname = current_database() AND pid <> pg_backend_pid() "
        "AND backend_start > (SELECT backend_start FROM pg_stat_activity "
        "WHERE pid = pg_backend_pid())",
        (WORKER_APP,),
    ).fetchall()
    return {int(r["pid"]) for r in rows}


def _done(conn: Any, run_id: str) -> bool:
    return _status(conn, run_id) == "done"


def _owned_by(conn: Any, run_id: str, pid: int) -> bool:
    row = conn.execute("SELECT owner FROM runs WHERE id = %s", (run_id,)).fetchone()
    return bool(row and row["owner"] and f":{pid}:" in row["owner"])


def _pool_on(
    supervisors: Any, mock_servers: Any, conn: Any, runs: list[str], latency: float
) -> SupervisorProcess:
    """A supervisor with two pool workers, started on ``runs`` (created first) with the
    model answering after ``latency`` seconds."""
    mock_servers.set_model_faults(latency=latency)
    journal = Journal(conn)
    for run_id in runs:
        journal.create_run(run_id)
    sup: SupervisorProcess = supervisors(*FAST, "--max-workers", "2")
    return sup


def test_one_pool_worker_takes_run_after_run_on_one_connection(
    agent: Agent, conn: Any, mock_servers: Any, supervisors: Any
) -> None:
    mock_servers.set_model_faults(latency=0.2)  # long enough to look at each run in flight
    runs = [f"reuse-{i}" for i in range(3)]
    sup = supervisors(*FAST, "--max-workers", "1")
    backends: list[set[int]] = []
    pids = []
    for run_id in runs:  # one after the other: the previous run is done first
        Journal(conn).create_run(run_id)
        _, pid = wait_for(f"a worker on {run_id}", functools.partial(sup.resumed, run_id))[0]
        wait_for(f"{run_id} adopted", functools.partial(_owned_by, conn, run_id, pid))
        pids.append(pid)
        backends.append(_worker_backends(conn))
        wait_for(f"{run_id} done", functools.partial(_done, conn, run_id))
    assert len(set(pids)) == 1 and _started(sup) == pids[:1]  # one process took all three
    assert len(backends[0]) == 1
    assert backends == [backends[0]] * 3  # and one server backend: the same connection
    # the last run is done in the journal a moment before its worker says so
    wait_for("every run reported", lambda: len(sup.exits()) == len(runs))
    assert sup.exits() == [(run_id, 0) for run_id in runs]
    for run_id in runs:
        _assert_each_step_once(conn, mock_servers, run_id)


def test_a_pool_worker_killed_mid_run_is_replaced_at_once_and_its_run_resumed(
    agent: Agent, conn: Any, mock_servers: Any, supervisors: Any
) -> None:
    sup = _pool_on(supervisors, mock_servers, conn, ["victim", "bystander"], 0.4)
    wait_for("two workers", lambda: len(sup.resumed()) == 2)
    pids = dict(sup.resumed())
    wait_for("the victim's first model call", lambda: mock_servers.calls("victim") == 1)
    os.kill(pids["victim"], signal.SIGKILL)
    # No clock is moved: the supervisor sees its own worker die, not a lease run out.
    wait_for("the victim resumed", lambda: len(sup.resumed("victim")) == 2)
    replacement = sup.resumed("victim")[1][1]
    assert _started(sup) == [pids["victim"], pids["bystander"], replacement]
    wait_for("both runs done", lambda: {_status(conn, r) for r in pids} == {"done"})
    mock_servers.set_model_faults(latency=0)
    assert ("victim", -signal.SIGKILL) in sup.exits("victim")
    wait_for("the bystander reported", lambda: sup.exits("bystander"))  # just after done
    assert sup.exits("bystander") == [("bystander", 0)]  # its worker never noticed
    assert _children(sup.proc.pid) == {pids["bystander"], replacement}  # the pool kept its size
    for run_id in pids:
        _assert_each_step_once(conn, mock_servers, run_id)
    assert mock_servers.calls("victim") == 5  # the one unanswered question asked again


def test_a_spare_worker_waits_open_and_takes_the_run_of_one_that_dies(
    agent: Agent, conn: Any, mock_servers: Any, supervisors: Any
) -> None:
    mock_servers.set_model_faults(latency=0.4)
    Journal(conn).create_run("guarded")
    sup = supervisors(*FAST, "--max-workers", "2")
    _, first = wait_for("a worker on the run", lambda: sup.resumed("guarded"))[0]
    wait_for("a spare beside it", lambda: len(_started(sup)) == 2)
    spare = _started(sup)[1]
    wait_for("both connected", lambda: len(_worker_backends(conn)) == 2)  # the spare is open
    wait_for("the first model call", lambda: mock_servers.calls("guarded") == 1)
    os.kill(first, signal.SIGKILL)
    wait_for("the run resumed", lambda: len(sup.resumed("guarded")) == 2)
    assert sup.resumed("guarded")[1] == ("guarded", spare)  # not a process still opening
    wait_for("the run done", lambda: _status(conn, "guarded") == "done")
    mock_servers.set_model_faults(latency=0)
    wait_for("a new spare", lambda: len(_started(sup)) == 3)
    assert _children(sup.proc.pid) == {spare, _started(sup)[2]}
    _assert_each_step_once(conn, mock_servers, "guarded")


def test_an_idle_pool_worker_that_dies_is_replaced(
    agent: Agent, conn: Any, mock_servers: Any, supervisors: Any
) -> None:
    Journal(conn).create_run("first")
    sup = supervisors(*FAST, "--max-workers", "1")
    wait_for("the first run done", lambda: _status(conn, "first") == "done")
    [idle] = _started(sup)
    # idle only once the supervisor heard it end the run (the row is done a moment before)
    wait_for("its end heard", lambda: f"worker-exited run=first code=0 pid={idle}" in sup.text)
    os.kill(idle, signal.SIGKILL)
    wait_for("its replacement", lambda: len(_started(sup)) == 2)
    assert f"worker-gone pid={idle} code=-9" in sup.text
    Journal(conn).create_run("second")
    wait_for("the second run done", lambda: _status(conn, "second") == "done")
    assert sup.resumed("second") == [("second", _started(sup)[1])]


def test_idle_pool_workers_leave_with_their_supervisor(
    agent: Agent, conn: Any, mock_servers: Any, supervisors: Any
) -> None:
    runs = [f"idle-{i}" for i in range(2)]
    sup = _pool_on(supervisors, mock_servers, conn, runs, 0.2)
    wait_for("both runs done", lambda: {_status(conn, r) for r in runs} == {"done"})
    workers = _started(sup)
    assert len(workers) == 2 and all(_alive(pid) for pid in workers)
    sup.proc.kill()  # nothing tells them but the pipe's other end closing
    sup.stop()
    wait_for("the idle workers to exit", lambda: not any(_alive(pid) for pid in workers))
    wait_for("their connections closed", lambda: not _worker_backends(conn))


def test_sigterm_stops_busy_and_idle_pool_workers_and_frees_the_busy_ones_run(
    agent: Agent, conn: Any, mock_servers: Any, supervisors: Any
) -> None:
    sup = _pool_on(supervisors, mock_servers, conn, ["warm-0", "warm-1"], 0.2)
    wait_for(
        "two idle workers", lambda: {_status(conn, r) for r in ("warm-0", "warm-1")} == {"done"}
    )
    workers = _started(sup)
    assert len(workers) == 2
    mock_servers.set_model_faults(latency=5)
    Journal(conn).create_run("busy")
    _, busy = wait_for("a worker on the new run", lambda: sup.resumed("busy"))[0]
    assert busy in workers  # an idle worker took it: no process was started for it
    wait_for("the busy worker's model call", lambda: mock_servers.calls("busy") == 1)
    assert sup.stop(signal.SIGTERM) == 0
    assert "supervisor-stopped" in sup.text
    assert not any(_alive(pid) for pid in workers)  # it waited for both before exiting
    assert ("busy", -signal.SIGTERM) in sup.exits("busy")
    idle = next(pid for pid in workers if pid != busy)
    assert f"worker-gone pid={idle} code=-15" in sup.text
    row = conn.execute(
        "SELECT owner, lease_expires_at <= cr_now() AS free FROM runs WHERE id = 'busy'"
    ).fetchone()
    assert row["owner"] is None and row["free"]  # nobody has to wait out a lease
    wait_for("the workers' connections closed", lambda: not _worker_backends(conn))


@pytest.mark.parametrize("spawn", ["fork", "exec"])
def test_a_fresh_process_per_run_is_still_there_to_choose(
    spawn: str, agent: Agent, conn: Any, mock_servers: Any, supervisors: Any
) -> None:
    mock_servers.set_model_faults(latency=0.2)
    journal = Journal(conn)
    runs = [f"{spawn}-{i}" for i in range(3)]
    for run_id in runs:
        journal.create_run(run_id)
    sup = supervisors(*FAST, "--max-workers", "1", "--spawn", spawn, "--once")
    assert sup.wait(120) == 0, sup.text
    assert len({pid for _, pid in sup.resumed()}) == 3  # a process of its own per run
    assert _started(sup) == []  # and no pool
    for run_id in runs:
        _assert_each_step_once(conn, mock_servers, run_id)


def test_each_run_a_pool_worker_takes_is_the_task_its_claim_read(
    conn: Any, database_url: str, tmp_path: Path
) -> None:
    """Agent and input come down the pipe with each lease: the second run asks the model
    about its own input, not the first run's."""
    model = Recording(model_transport(Model()))
    cloud = Cloud(tmp_path / "cloud.sqlite3", synchronous="OFF")
    spec = WorkerSpec(
        url=database_url,
        settings=Settings(database_url=database_url, model_url="http://model/v1"),
        agents=[provisioning_parallel],
        transports=lambda: {"model": model, "cloud": cloud_transport(cloud)},
    )
    journal = Journal(conn)
    tasks = {"task-a": "a box named alpha", "task-b": "a box named bravo"}
    for run_id, text in tasks.items():
        journal.create_run(run_id, provisioning_parallel.name, text)
    params = {"owner": "sup", "lease": 30.0, "limit": 2, "max_attempts": 10, "agents": None}
    claimed = sorted(db.run(conn, "claim_expired", params), key=lambda r: str(r["id"]))
    ours, theirs = multiprocessing.Pipe(duplex=True)
    worker = threading.Thread(target=serve, args=(spec, theirs, None))
    worker.start()
    try:
        assert ours.recv() == ("ready",)
        for row in claimed:
            first = len(model.exchanges)
            handed = (row["id"], row["owner"], row["generation"], row["agent"], row["input"])
            ours.send(("run", *handed))
            assert ours.recv() == ("ended", row["id"], EXIT_DONE)
            asked = b"".join(e.body for e in model.exchanges[first:])
            assert tasks[row["id"]].encode() in asked
            assert all(t.encode() not in asked for r, t in tasks.items() if r != row["id"])
    finally:
        ours.close()
        worker.join(timeout=30)
        cloud.close()
    assert not worker.is_alive()
    assert {journal.require_run(r).status for r in tasks} == {"done"}


def test_an_idle_pool_worker_whose_connection_died_takes_the_next_run_on_a_new_one(
    agent: Agent, conn: Any, mock_servers: Any, supervisors: Any
) -> None:
    """The server ends an idle worker's connection (as a restart does): the next run it is
    handed goes through on a new connection, in the same process, with one claim only (a
    worker that found out at the run's first statement exited and cost the run an attempt,
    and a run with few attempts left was given up for a database restart)."""
    sup = supervisors(*FAST, "--max-workers", "1")
    Journal(conn).create_run("before")
    wait_for("before done", functools.partial(_done, conn, "before"))
    wait_for("before reported", lambda: len(sup.exits()) == 1)
    idle = _worker_backends(conn)
    assert len(idle) == 1
    for backend in idle:
        conn.execute("SELECT pg_terminate_backend(%s)", (backend,))
    Journal(conn).create_run("after")
    wait_for("after done", functools.partial(_done, conn, "after"))
    wait_for("after reported", lambda: len(sup.exits()) == 2)
    assert sup.exits() == [("before", 0), ("after", 0)]
    assert len(_started(sup)) == 1  # the same process took it
    claims = conn.execute("SELECT generation FROM run_claims WHERE run_id = 'after'").fetchall()
    assert [row["generation"] for row in claims] == [1]
    assert _worker_backends(conn).isdisjoint(idle)  # on a new connection
