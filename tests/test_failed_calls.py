"""A failed run can always be got past, and a call is never redone while it may still land.

A run that failed on a call in doubt (a remote that refuses the re-send, a give-up while it
kept failing) would fail the same way after every ``retry``: its next owner sends that call
again. The operator settles the call on the failed run first (``resolve RUN --seq N
--confirm JSON | --fail``; the run stays failed until ``retry``), and ``retry`` names the
call it failed on and says so. ``--redo`` and ``--fail`` are refused while a request of the
call may still act at its remote (before its ``lands_by``); ``--confirm`` is not. Every
command runs as a real process against real PostgreSQL; time moves through ``cr_now()``.
"""

from __future__ import annotations

from typing import Any

from agent_runtime.errors import EXIT_NOT_OWNER
from agent_runtime.store import clock, db
from agent_runtime.store.journal import Journal

from .operator_cli import cli
from .test_attention import _call, _parked, _resolutions, _row

LEASE = 12.0  # seconds
REJECTED = "RemoteRejected: the cloud rejected key=f1:0 with HTTP 409 conflict: name taken"


def _failed_on_its_call(conn: db.Connection, run_id: str = "f1") -> None:
    """A run whose keyed call seq 0 is in doubt and whose remote refused its re-send."""
    journal = Journal(conn)
    journal.create_run(run_id)
    lease = journal.claim(run_id, "w:1:x", LEASE)
    assert lease is not None
    journal.record_decision(lease, 0, "create_server", {"name": "srv-1"})
    journal.record_intent(lease, 0, "keyed")
    journal.fail(lease, REJECTED.replace("f1", run_id))


def test_a_failed_runs_call_in_doubt_is_confirmed_and_the_run_waits_for_retry(
    conn: db.Connection, database_url: str
) -> None:
    _failed_on_its_call(conn)
    failed = _row(conn, "f1")
    result = '{"id": "i-0000007", "status": "created"}'

    out = cli(database_url, "resolve", "f1", "--seq", "0", "--confirm", result)
    assert out.code == 0, out.stderr
    assert "run f1: seq 0 (key f1:0) confirmed with the result you gave" in out.stdout
    assert "the run stays failed until you retry it: `python -m agent_runtime retry f1`" in (
        out.stdout
    )
    run = _row(conn, "f1")  # nothing but the call changed: the operator retries when ready
    assert (run["status"], run["failure"], run["updated_at"]) == (
        "failed",
        REJECTED,
        failed["updated_at"],
    )
    call = _call(conn, "f1", 0)
    assert (call["state"], call["remote_status"]) == ("confirmed", "operator")
    assert call["result"] == {"id": "i-0000007", "status": "created"}
    (record,) = _resolutions(conn, "f1")
    assert (record["choice"], record["parked_reason"]) == ("confirm", REJECTED)

    retried = cli(database_url, "retry", "f1", "--json")
    assert retried.code == 0, retried.stderr
    assert (retried.json()["status"], retried.json()["in_doubt"]) == ("pending", [])
    assert retried.json()["failed_on"] is None
    shown = cli(database_url, "show", "f1", "--json")
    assert shown.json()["in_doubt"] == []


def test_a_failed_runs_call_can_be_given_up_and_json_says_the_run_stays_failed(
    conn: db.Connection, database_url: str
) -> None:
    _failed_on_its_call(conn)
    out = cli(
        database_url, "resolve", "f1", "--seq", "0", "--fail", "--reason", "name taken", "--json"
    )
    assert out.code == 0, out.stderr
    assert (out.json()["status"], out.json()["state"]) == ("failed", "failed")
    call = _call(conn, "f1", 0)
    assert (call["state"], call["result"]["error"]) == ("failed", "failed_by_operator")
    assert _row(conn, "f1")["status"] == "failed"


def test_retry_of_a_run_that_failed_on_a_call_in_doubt_says_how_to_get_past_it(
    conn: db.Connection, database_url: str
) -> None:
    _failed_on_its_call(conn)
    shown = cli(database_url, "show", "f1")
    assert "nothing sends under f1:0 until a `retry f1`" in shown.stdout
    assert "python -m agent_runtime resolve f1 --seq 0 --confirm JSON` (it acted)" in shown.stdout

    retried = cli(database_url, "retry", "f1")
    assert retried.code == 0, retried.stderr
    assert (
        "it failed on f1:0, still in doubt: if the remote refuses it again, the run fails the "
        "same way; then settle that call (`resolve f1 --seq 0 --confirm JSON` if it acted, "
        "`--fail` to give it up) and retry again"
    ) in retried.stdout
    as_json = cli(database_url, "show", "f1", "--json")
    assert as_json.code == 0


def test_resolving_a_call_of_a_pending_run_is_still_refused(
    conn: db.Connection, database_url: str
) -> None:
    _failed_on_its_call(conn)
    assert cli(database_url, "retry", "f1").code == 0
    out = cli(database_url, "resolve", "f1", "--seq", "0", "--fail")
    assert out.code == EXIT_NOT_OWNER
    assert "run f1 is pending, not needs_attention or failed" in out.stderr
    assert _call(conn, "f1", 0)["state"] == "intent"


def _parked_in_flight(conn: Any, seconds: float) -> None:
    """A parked run whose call seq 1 may still act for ``seconds`` (its lands_by)."""
    _parked(Journal(conn), "p1")
    conn.execute(
        "UPDATE tool_calls SET lands_by = cr_now() + make_interval(secs => %s)"
        " WHERE run_id = 'p1' AND seq = 1",
        (seconds,),
    )


def test_redo_and_fail_are_refused_while_the_call_may_still_land_and_accepted_after(
    conn: Any, database_url: str
) -> None:
    clock.freeze(conn)
    _parked_in_flight(conn, 15.0)
    for choice in ("--redo", "--fail"):
        out = cli(database_url, "resolve", "p1", "--seq", "1", choice)
        assert out.code == EXIT_NOT_OWNER, out.stderr
        assert "Traceback" not in out.stderr and len(out.stderr.splitlines()) == 1
        assert "call seq 1 of run p1 may still land: its last request may act at the remote " in (
            out.stderr
        )
        assert "(in 15.0s)" in out.stderr
        harm = "send it twice" if choice == "--redo" else "give up a call that then acts"
        assert f"so {choice} now could {harm}; wait until then, or --confirm JSON" in out.stderr
    assert _call(conn, "p1", 1)["state"] == "intent"
    assert _row(conn, "p1")["status"] == "needs_attention"

    clock.advance(conn, 15.0)  # its lands_by: nothing it sent can act any more
    out = cli(database_url, "resolve", "p1", "--seq", "1", "--redo")
    assert out.code == 0, out.stderr
    assert _call(conn, "p1", 1)["state"] == "redo"


def test_confirm_is_accepted_while_the_call_may_still_land(conn: Any, database_url: str) -> None:
    clock.freeze(conn)
    _parked_in_flight(conn, 15.0)
    out = cli(database_url, "resolve", "p1", "--seq", "1", "--confirm", '{"id": "M-1"}')
    assert out.code == 0, out.stderr
    assert _call(conn, "p1", 1)["state"] == "confirmed"
