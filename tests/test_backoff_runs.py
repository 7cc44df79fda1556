"""A run stopped by a transient failure waits out its backoff, and is given up only after
enough attempts *and* enough time without progress.

Its backoff is honoured by every claim (the CLI's, an in-process restart's, the
supervisor's sweep), doubles with each attempt without progress up to the cap, and
starts over with progress. Real PostgreSQL; time for the run's backoff moves through
``cr_now()`` (``clock.advance``), so nothing here sleeps. The clients' own retries are
test_backoff_clients.py.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent_runtime.config import Settings
from agent_runtime.crash import CrashPlan
from agent_runtime.errors import (
    EXIT_RETRY_LATER,
    BackingOff,
    ModelUnavailable,
)
from agent_runtime.loop.worker import Worker
from agent_runtime.store import clock, db
from agent_runtime.store.journal import Journal
from mock_remotes import Cloud, FaultTransport, Model, cloud_transport, model_transport

from .fix_runtime import SERVER, Agent, journal_rows

LEASE = 12.0  # seconds


# -- the run's backoff: every claim path honours it ------------------------------------------


@pytest.fixture
def remotes(tmp_path: Path) -> Iterator[tuple[Cloud, Model]]:
    with Cloud(tmp_path / "cloud.sqlite3") as cloud:
        yield cloud, Model()


def _worker(
    conn: Any,
    remotes: tuple[Cloud, Model],
    model_faults: int = 0,
    crash: CrashPlan | None = None,
) -> tuple[Worker, FaultTransport]:
    """A worker whose model refuses the next ``model_faults`` connections (two refusals
    make one question fail: ``model_retries=1``)."""
    cloud, model = remotes
    settings = Settings(run_backoff=2.0, run_backoff_cap=30.0, model_retries=1)
    model_side = FaultTransport(model_transport(model)).inject("connect_error", times=model_faults)
    worker = Worker.build(
        Journal(conn),
        settings,
        model_transport=model_side,
        cloud_transport=cloud_transport(cloud),
        sleep=lambda seconds: None,
        rand=lambda: 0.0,  # the longest wait, exactly
        crash=crash,
    )
    return worker, model_side


def _wait(conn: Any, run_id: str) -> float:
    row = conn.execute(
        "SELECT owner, extract(epoch FROM lease_expires_at - cr_now())::float AS wait"
        " FROM runs WHERE id = %s",
        (run_id,),
    ).fetchone()
    assert row["owner"] is None
    return float(row["wait"])


def _supervisor_claims(conn: Any) -> list[str]:
    params = {"owner": "sup:1:s", "lease": LEASE, "limit": 10, "max_attempts": 5, "agents": None}
    return [r["id"] for r in db.run(conn, "claim_expired", params)]


def test_a_run_stopped_by_an_outage_is_claimable_by_nobody_before_its_backoff(
    conn: Any, remotes: tuple[Cloud, Model]
) -> None:
    clock.freeze(conn)  # the waits below are exact
    down, _ = _worker(conn, remotes, model_faults=2)  # both attempts at the question fail
    with pytest.raises(ModelUnavailable):
        down.run("out")
    assert _wait(conn, "out") == pytest.approx(2.0)  # run_backoff, first attempt
    generation = Journal(conn).require_run("out").generation

    assert Journal(conn).claim("out", "cli:1:x", LEASE) is None  # claim_run: CLI, in-process
    assert _supervisor_claims(conn) == []  # claim_expired: the supervisor's sweep
    with pytest.raises(BackingOff, match=r"backing off after 1 attempt\(s\) until .* retry out"):
        _worker(conn, remotes)[0].run("out", create=False)
    assert Journal(conn).require_run("out").generation == generation  # nobody claimed it

    clock.advance(conn, 1.9)
    assert Journal(conn).claim("out", "cli:1:x", LEASE) is None
    clock.advance(conn, 0.2)
    outcome = _worker(conn, remotes)[0].run("out", create=False)
    assert outcome.status == "done" and outcome.steps == 3


def test_each_attempt_without_progress_waits_twice_as_long_up_to_the_cap(
    conn: Any, remotes: tuple[Cloud, Model]
) -> None:
    clock.freeze(conn)
    waits = []
    for attempt in range(6):  # each claim is the worker's own, once the last wait is over
        with pytest.raises(ModelUnavailable):
            _worker(conn, remotes, model_faults=2)[0].run("flaky", create=attempt == 0)
        waits.append(round(_wait(conn, "flaky"), 3))
        clock.advance(conn, waits[-1])
    assert waits == [2.0, 4.0, 8.0, 16.0, 30.0, 30.0]
    assert _supervisor_claims(conn) == ["flaky"]


def test_progress_starts_the_waits_over(conn: Any, remotes: tuple[Cloud, Model]) -> None:
    clock.freeze(conn)
    for attempt in range(3):  # three failed attempts at the first question: waits 2, 4, 8
        with pytest.raises(ModelUnavailable):
            _worker(conn, remotes, model_faults=2)[0].run("p", create=attempt == 0)
        clock.advance(conn, _wait(conn, "p"))
    # The fourth goes through step 0 (a confirm: progress); then the model is down again.
    model_side: list[FaultTransport] = []
    outage = CrashPlan(
        point="after_confirm",
        seq=0,
        action=lambda point, seq: model_side[0].inject("connect_error", times=2) and None,
    )
    worker, transport = _worker(conn, remotes, crash=outage)
    model_side.append(transport)
    with pytest.raises(ModelUnavailable):
        worker.run("p", create=False)
    assert [c["state"] for c in journal_rows(conn, "p")["calls"]] == ["confirmed"]
    assert _wait(conn, "p") == pytest.approx(2.0)  # the first wait again, not the fourth


# -- giving up: attempts and time -----------------------------------------------------------


def _give_up(conn: Any, max_attempts: int, give_up_after: float) -> list[str]:
    params = {"max_attempts": max_attempts, "give_up_after": give_up_after}
    return [r["id"] for r in db.run(conn, "give_up_exhausted", params)]


def _stop_again(journal: Journal, run_id: str, times: int) -> None:
    for _ in range(times):
        lease = journal.claim(run_id, "w:1:x", LEASE)
        assert lease is not None
        assert journal.release(lease, "ModelUnavailable: down", delay=0.0)


def test_a_run_is_given_up_only_after_enough_attempts_and_enough_time(conn: Any) -> None:
    clock.freeze(conn)
    journal = Journal(conn)
    journal.create_run("many-fast")
    _stop_again(journal, "many-fast", 9)  # attempts burnt within an instant
    journal.create_run("few-slow")
    _stop_again(journal, "few-slow", 2)

    assert _give_up(conn, max_attempts=5, give_up_after=60) == []  # attempts, but no time
    clock.advance(conn, 59)
    assert _give_up(conn, max_attempts=5, give_up_after=60) == []
    clock.advance(conn, 1)
    assert _give_up(conn, max_attempts=5, give_up_after=60) == ["many-fast"]
    assert journal.require_run("few-slow").status == "running"  # time, but not the attempts

    failure = journal.require_run("many-fast").failure or ""
    assert failure.startswith("gave up after 9 attempts in 60 s without progress: ModelUnav")


def test_the_give_up_clock_starts_at_the_first_attempt_after_the_last_progress(
    conn: Any,
) -> None:
    clock.freeze(conn)
    journal = Journal(conn)
    journal.create_run("old")
    clock.advance(conn, 3600)  # created an hour ago, claimed only now
    _stop_again(journal, "old", 5)
    assert _give_up(conn, max_attempts=5, give_up_after=600) == []  # an hour old, 0 s trying
    lease = journal.claim("old", "w:1:x", LEASE)
    assert lease is not None
    journal.record_decision(lease, 0, "create_server", dict(SERVER))
    call = journal.record_intent(lease, 0)
    clock.advance(conn, 599)
    journal.record_confirm(lease, call, {"id": "i-1"}, "created")  # progress: attempts 0
    assert journal.release(lease, "ModelUnavailable: down", delay=0.0)
    clock.advance(conn, 10)
    _stop_again(journal, "old", 5)
    clock.advance(conn, 599)
    assert _give_up(conn, max_attempts=5, give_up_after=600) == []
    clock.advance(conn, 1)
    assert _give_up(conn, max_attempts=5, give_up_after=600) == ["old"]


# -- the command line ------------------------------------------------------------------------


@pytest.mark.usefixtures("frozen_clock")
def test_a_run_backing_off_is_refused_by_run_with_when_and_how_then_finishes(
    agent: Agent, conn: Any, mock_servers: Any
) -> None:
    mock_servers.set_model_faults(malformed=1)
    first = agent.run("cli-wait", RUN_BACKOFF="30")  # long enough to still run when asked
    assert first.code == EXIT_RETRY_LATER, first.out
    generation = Journal(conn).require_run("cli-wait").generation

    early = agent.run("cli-wait")

    assert early.code == EXIT_RETRY_LATER, early.out
    (line,) = [ln for ln in early.out.splitlines() if ln.startswith("ERROR")]
    assert line.startswith("ERROR BackingOff error='run cli-wait is backing off after 1 ")
    assert "retry cli-wait" in line
    assert Journal(conn).require_run("cli-wait").generation == generation
    assert mock_servers.calls("cli-wait") == 1

    clock.advance(conn, 30)  # the longest first wait
    late = agent.run("cli-wait")
    assert late.code == 0, late.out
    assert mock_servers.resources("cli-wait")["total"] == 3
