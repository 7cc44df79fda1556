"""A request can outlive its sender: a ``checked`` call is never checked while an earlier
attempt of it may still act at the remote.

The mock desk's ``send_latency`` knob makes a send wait before it delivers, so the email
lands after its sender timed out, was killed, or checked. Each test counts what the desk
delivered under the call's key: exactly one, whatever happened to the sender.

- the worker's own retry (no crash at all): the send times out, the retry must wait out
  the first attempt's bound before its check, which then finds the late delivery;
- a kill while the request is inside the desk, and a restart at once: the restart's check
  waits out the bound, then finds it;
- with the database clock frozen (the seam every lease test uses) the wait cannot pass:
  the worker releases the run with a backoff that ends when the bound does, and checks
  nothing; once the clock has passed the bound the next start checks, then acts.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from typing import Any

import pytest

from agent_runtime.errors import EXIT_RETRY_LATER
from agent_runtime.store import clock

from .desk import EMAIL, Desk, finished, remote_status
from .fix_supervisor import wait_for


def _quiet(latency: float) -> None:
    """Let every request still inside the desk act before counting: a send that left last
    lands ``latency`` seconds after it arrived, whatever its sender did meanwhile."""
    time.sleep(latency + 0.5)


def _lands_by(conn: Any, run_id: str, seq: int) -> Any:
    row = conn.execute(
        "SELECT lands_by, sends, lands_by - intent_at AS bound FROM tool_calls"
        " WHERE run_id = %s AND seq = %s",
        (run_id, seq),
    ).fetchone()
    return row


def test_a_send_that_timed_out_is_not_checked_until_it_can_no_longer_land(
    desk: Desk, conn: Any
) -> None:
    run_id = "in-flight-timeout"
    key = f"{run_id}:{EMAIL}"
    desk.servers.set_support_faults(send_latency=1.5)  # the desk delivers 1.5 s after a send

    # The send gives up after 0.5 s; the desk acts at 1.5 s. A retry that checked right
    # away would find nothing and send again: two emails.
    result = desk.run(run_id, TOOL_TIMEOUT="0.5", IN_FLIGHT_MARGIN="1.5")
    _quiet(1.5)

    finished(result)
    assert [d["message_id"] for d in desk.deliveries(run_id)] == [key]
    assert desk.answers("send_email", key) == ["delivered"]
    assert desk.answers("check_message", key) == ["present"]  # one check, after the bound
    assert remote_status(result, EMAIL) == "found"
    assert any(f"key={key}" in line for line in result.lines("awaiting-landing")), result.out
    call = desk.calls(conn, run_id)[EMAIL]
    assert (call["state"], call["remote_status"]) == ("confirmed", "found")


def test_a_worker_killed_while_its_send_is_in_flight_is_restarted_and_sends_nothing_more(
    desk: Desk, conn: Any
) -> None:
    run_id = "in-flight-kill"
    key = f"{run_id}:{EMAIL}"
    desk.servers.set_support_faults(send_latency=2.0)  # the request sits in the desk for 2 s
    env = desk.runner.env(
        run_id, SUPPORT_URL=desk.servers.support_url, MODEL_URL=f"{desk.servers.model_url}/v1"
    )
    env.update(TOOL_TIMEOUT="3", IN_FLIGHT_MARGIN="0.5")
    first = subprocess.Popen(
        [sys.executable, "-m", "agent_runtime", "run", "--agent", "tests.agents:support"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for("the email's intent", lambda: _lands_by(conn, run_id, EMAIL))
        time.sleep(0.3)  # the request is inside the desk now, which has not acted yet
        os.kill(first.pid, signal.SIGKILL)
    finally:
        first.wait(timeout=30)
    assert desk.deliveries(run_id) == []  # not yet: the desk is still holding it

    second = desk.run(run_id, "support", TOOL_TIMEOUT="3", IN_FLIGHT_MARGIN="0.5")
    _quiet(2.0)

    finished(second)
    assert [d["message_id"] for d in desk.deliveries(run_id)] == [key]
    assert desk.answers("check_message", key) == ["present"]
    assert remote_status(second, EMAIL) == "found"


def test_with_the_clock_frozen_a_call_in_flight_is_released_until_its_bound_then_checked(
    desk: Desk, conn: Any
) -> None:
    run_id = "in-flight-frozen"
    key = f"{run_id}:{EMAIL}"
    clock.freeze(conn)
    try:
        desk.crash(run_id, "after_intent", EMAIL)  # an intent whose request never left
        held = _lands_by(conn, run_id, EMAIL)
        assert held["bound"].total_seconds() == pytest.approx(10.0 + 5.0)  # defaults

        second = desk.run(run_id)  # the clock does not move: the bound cannot pass

        assert second.code == EXIT_RETRY_LATER, second.out
        assert desk.answers("check_message", key) == []  # nothing was asked too early
        run = desk.status(conn, run_id)
        assert (run["status"], run["owner"]) == ("running", None)  # free, backing off
        assert run["lease_expires_at"] == held["lands_by"]  # claimable once it cannot land
        assert "CallInFlight" in run["failure"]

        clock.advance(conn, 15.0)
        third = desk.run(run_id)

        finished(third)
        assert desk.answers("check_message", key) == ["absent"]
        assert desk.answers("send_email", key) == ["delivered"]
        assert remote_status(third, EMAIL) == "created"
        after = _lands_by(conn, run_id, EMAIL)
        assert after["sends"] == 2  # the send after the check was journaled before it left
        assert after["lands_by"] > held["lands_by"]
    finally:
        clock.thaw(conn)
