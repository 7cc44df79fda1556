"""A ``once`` call in doubt parks its run, and the operator's decision settles it, with
real processes.

The once agent is killed on its email (``CRASH_AT``/``CRASH_SEQ``) and restarted: the
restart parks the run (exit 6, ``needs_attention``) and sends nothing, however often it
is run. The operator decides (``resolve --seq 2 --confirm | --redo | --fail``) and the
next run finishes with exactly the deliveries that decision implies; a redo that crashes
after its send parks again instead of sending twice. The contracts a restart settles by
itself are test_contracts_restart.py.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from agent_runtime.errors import EXIT_CRASHED, EXIT_NEEDS_ATTENTION

from .desk import CRASH_FREE_MODEL_CALLS, EMAIL, IN_DOUBT, Desk, finished, parked


@pytest.mark.parametrize("point", IN_DOUBT)
def test_a_once_call_in_doubt_parks_the_run_and_no_restart_sends_it(
    point: str, desk: Desk, conn: Any
) -> None:
    run_id = f"once-{point}"
    parked(desk, conn, run_id, point)
    before = desk.status(conn, run_id)
    again = desk.run(run_id, "support_once")  # a parked run stays parked, untouched
    assert again.code == EXIT_NEEDS_ATTENTION, again.out
    assert "needs_attention" in again.out
    assert desk.status(conn, run_id) == before
    assert len(desk.deliveries(run_id)) == (0 if point == "after_intent" else 1)
    assert desk.servers.calls(run_id) == EMAIL + 1  # no model call after the parked step


def test_a_parked_send_that_acted_is_confirmed_by_the_operator_and_delivered_once(
    desk: Desk, conn: Any
) -> None:
    run_id = "once-confirm"
    parked(desk, conn, run_id, "after_call")
    (delivery,) = desk.deliveries(run_id)  # the operator looks in the mailbox: it went out
    resolved = desk.resolve(run_id, "--seq", str(EMAIL), "--confirm", json.dumps(delivery))
    assert resolved.code == 0, resolved.stderr
    assert desk.status(conn, run_id)["status"] == "pending"

    third = desk.run(run_id, "support_once")
    finished(third)
    assert len(desk.deliveries(run_id)) == 1
    call = desk.calls(conn, run_id)[EMAIL]
    assert (call["state"], call["remote_status"], call["result"]) == (
        "confirmed",
        "operator",
        delivery,
    )
    run = desk.status(conn, run_id)
    assert run["status"] == "done" and "emailed ada@example.test" in run["output"]
    assert desk.servers.calls(run_id) == CRASH_FREE_MODEL_CALLS  # it went on from that result


def test_a_parked_send_that_never_left_is_redone_by_the_operator_and_delivered_once(
    desk: Desk, conn: Any
) -> None:
    run_id = "once-redo"
    parked(desk, conn, run_id, "after_intent")
    resolved = desk.resolve(run_id, "--seq", str(EMAIL), "--redo", "--reason", "not in the outbox")
    assert resolved.code == 0, resolved.stderr
    assert desk.calls(conn, run_id)[EMAIL]["state"] == "redo"

    third = desk.run(run_id, "support_once")
    finished(third)
    assert "effect=redo ordered by an operator" in third.lines("resending")[0]
    assert [d["message_id"] for d in desk.deliveries(run_id)] == [f"{run_id}:{EMAIL}"]
    call = desk.calls(conn, run_id)[EMAIL]
    assert (call["state"], call["remote_status"]) == ("confirmed", "created")
    assert desk.status(conn, run_id)["status"] == "done"


def test_a_redo_that_crashes_after_its_send_parks_again_instead_of_sending_twice(
    desk: Desk, conn: Any
) -> None:
    run_id = "once-redo-twice"
    parked(desk, conn, run_id, "after_intent")
    assert desk.resolve(run_id, "--seq", str(EMAIL), "--redo").code == 0
    redo = desk.run(run_id, "support_once", CRASH_AT="after_call", CRASH_SEQ=str(EMAIL))
    assert redo.code == EXIT_CRASHED, redo.out
    assert len(desk.deliveries(run_id)) == 1  # the redo went out; its confirm did not

    fourth = desk.run(run_id, "support_once")
    assert fourth.code == EXIT_NEEDS_ATTENTION, fourth.out  # in doubt again: not re-sent
    assert len(desk.deliveries(run_id)) == 1
    (delivery,) = desk.deliveries(run_id)
    assert desk.resolve(run_id, "--seq", str(EMAIL), "--confirm", json.dumps(delivery)).code == 0
    finished(desk.run(run_id, "support_once"))
    assert len(desk.deliveries(run_id)) == 1


def test_a_parked_send_failed_by_the_operator_is_seen_by_the_model_which_sends_anew(
    desk: Desk, conn: Any
) -> None:
    run_id = "once-fail"
    parked(desk, conn, run_id, "after_intent")
    resolved = desk.resolve(run_id, "--seq", str(EMAIL), "--fail", "--reason", "bounced")
    assert resolved.code == 0, resolved.stderr

    third = desk.run(run_id, "support_once")
    finished(third)
    calls = desk.calls(conn, run_id)
    failed = calls[EMAIL]
    assert (failed["state"], failed["remote_status"]) == ("failed", "operator")
    assert failed["result"]["error"] == "failed_by_operator"
    assert "bounced" in failed["result"]["message"]
    # The model saw the failure and asked for the email again: a new step, a new key.
    assert calls[EMAIL + 1]["idem_key"] == f"{run_id}:{EMAIL + 1}"
    assert calls[EMAIL + 1]["state"] == "confirmed"
    assert [d["message_id"] for d in desk.deliveries(run_id)] == [f"{run_id}:{EMAIL + 1}"]
    assert desk.servers.calls(run_id) == CRASH_FREE_MODEL_CALLS + 1
