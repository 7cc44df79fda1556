"""What a restart does by itself with a call in doubt, per effect contract, with real
processes.

Each test kills ``python -m agent_runtime run --agent tests.agents:...`` at a crash point
(``CRASH_AT``/``CRASH_SEQ``: ``os._exit(1)``), restarts it, and counts what the mock
support desk (under uvicorn) did: its tickets, its deliveries, and the log of every answer
it gave. The support plan's steps: seq 0 ``lookup_order`` (read), 1 ``file_ticket``
(keyed), 2 ``send_email`` (checked, or once), 3 the final text.

- ``read``: called again, nothing else repeated;
- ``keyed``: re-sent under the same key: ``created`` if it never arrived, ``already_done``
  if it did, one ticket either way;
- ``checked``: the restart checks first: ``found`` (nothing sent again) after the call,
  sent once after the intent; exactly one delivery;
- a crash anywhere else on the email leaves nothing in doubt, whatever the contract.

And: a worker refuses a run of an agent it does not have (exit 2, the run untouched), and
an answer with several tool calls journals one decision and one key per call, and resumes
between them without a second answer. A ``once`` call in doubt, which no restart
settles, is test_contracts_once.py.
"""

from __future__ import annotations

from typing import Any

import pytest

from agent_runtime.crash import CRASH_POINTS
from agent_runtime.errors import EXIT_CRASHED, EXIT_USAGE

from .desk import (
    CRASH_FREE_MODEL_CALLS,
    EMAIL,
    IN_DOUBT,
    LOOKUP,
    TICKET,
    Desk,
    finished,
    remote_status,
)
from .fix_runtime import Agent

# -- read --------------------------------------------------------------------------------------


@pytest.mark.parametrize("point", IN_DOUBT)
def test_a_read_in_doubt_is_simply_called_again(point: str, desk: Desk, conn: Any) -> None:
    run_id = f"read-{point}"
    desk.crash(run_id, point, LOOKUP)
    looked = desk.answers("lookup_order", "A-1001")
    assert looked == ([] if point == "after_intent" else ["found"])

    second = desk.run(run_id)
    finished(second)
    assert desk.answers("lookup_order", "A-1001") == [*looked, "found"]  # called again
    assert remote_status(second, LOOKUP) == "read"
    assert desk.calls(conn, run_id)[LOOKUP]["remote_status"] == "read"
    assert len(desk.tickets(run_id)) == 1 and len(desk.deliveries(run_id)) == 1
    assert desk.servers.calls(run_id) == CRASH_FREE_MODEL_CALLS


# -- keyed -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("point", "remote"), [("after_intent", "created"), ("after_call", "already_done")]
)
def test_a_keyed_call_in_doubt_is_resent_under_its_key_and_files_one_ticket(
    point: str, remote: str, desk: Desk, conn: Any
) -> None:
    run_id = f"keyed-{point}"
    key = f"{run_id}:{TICKET}"
    desk.crash(run_id, point, TICKET)
    assert len(desk.tickets(run_id)) == (0 if point == "after_intent" else 1)

    second = desk.run(run_id)
    finished(second)
    assert remote_status(second, TICKET) == remote
    tickets = desk.tickets(run_id)
    assert [t["key"] for t in tickets] == [key]
    answered = desk.answers("file_ticket", key)
    assert answered == (["created"] if point == "after_intent" else ["created", "already_done"])
    call = desk.calls(conn, run_id)[TICKET]
    assert (call["effect"], call["remote_status"]) == ("keyed", remote)
    assert call["result"]["id"] == tickets[0]["id"]
    assert len(desk.deliveries(run_id)) == 1


# -- checked -----------------------------------------------------------------------------------


def test_a_checked_send_that_acted_is_found_by_the_check_and_not_sent_again(
    desk: Desk, conn: Any
) -> None:
    run_id = "checked-after_call"
    key = f"{run_id}:{EMAIL}"
    desk.crash(run_id, "after_call", EMAIL)
    assert len(desk.deliveries(run_id)) == 1  # the mailbox delivered; the journal has no confirm

    second = desk.run(run_id)
    finished(second)
    assert remote_status(second, EMAIL) == "found"
    deliveries = desk.deliveries(run_id)
    assert [d["message_id"] for d in deliveries] == [key]  # exactly one, never sent again
    assert desk.answers("send_email", key) == ["delivered"]
    assert desk.answers("check_message", key) == ["present"]
    call = desk.calls(conn, run_id)[EMAIL]
    assert (call["effect"], call["state"], call["remote_status"]) == (
        "checked",
        "confirmed",
        "found",
    )
    assert call["result"]["id"] == deliveries[0]["id"]


def test_a_checked_send_that_never_left_is_checked_then_sent_once(desk: Desk, conn: Any) -> None:
    run_id = "checked-after_intent"
    key = f"{run_id}:{EMAIL}"
    desk.crash(run_id, "after_intent", EMAIL)
    assert desk.deliveries(run_id) == []

    second = desk.run(run_id)
    finished(second)
    assert remote_status(second, EMAIL) == "created"
    assert desk.answers("check_message", key) == ["absent"]  # asked first ...
    assert desk.answers("send_email", key) == ["delivered"]  # ... then sent, once
    assert [d["message_id"] for d in desk.deliveries(run_id)] == [key]
    assert desk.calls(conn, run_id)[EMAIL]["remote_status"] == "created"


# -- the other crash points: nothing is in doubt, so the contract changes nothing ----------------


@pytest.mark.parametrize("point", [p for p in CRASH_POINTS if p not in IN_DOUBT])
@pytest.mark.parametrize("who", ["support", "support_once"])
def test_a_crash_anywhere_else_on_the_email_step_finishes_with_one_of_everything(
    point: str, who: str, desk: Desk, conn: Any
) -> None:
    run_id = f"{who}-{point}"
    desk.crash(run_id, point, EMAIL, agent=who)
    finished(desk.run(run_id, who))
    assert len(desk.tickets(run_id)) == 1
    assert [d["message_id"] for d in desk.deliveries(run_id)] == [f"{run_id}:{EMAIL}"]
    re_asked = 1 if point == "after_decide_before_journal" else 0
    assert desk.servers.calls(run_id) == CRASH_FREE_MODEL_CALLS + re_asked
    effects = [c["effect"] for c in desk.calls(conn, run_id)]
    assert effects == ["read", "keyed", "checked" if who == "support" else "once"]


# -- agents ------------------------------------------------------------------------------------


def test_a_worker_refuses_a_run_of_an_agent_it_does_not_have_and_leaves_it_untouched(
    desk: Desk, conn: Any
) -> None:
    run_id = "not-mine"
    desk.crash(run_id, "after_intent", TICKET)
    before = desk.status(conn, run_id)
    assert before["agent"] == "support"
    calls = desk.calls(conn, run_id)

    other = desk.runner.run(run_id)  # the default worker: the provisioning agent only
    assert other.code == EXIT_USAGE, other.out
    assert "belongs to agent 'support'" in other.out
    assert "it has: provisioning" in other.out
    assert "Traceback" not in other.out
    assert desk.status(conn, run_id) == before
    assert desk.calls(conn, run_id) == calls
    assert desk.tickets(run_id) == []

    finished(desk.run(run_id))  # the worker that has the agent finishes it
    assert len(desk.tickets(run_id)) == 1


# -- several tool calls in one answer ----------------------------------------------------------

PARALLEL = {"MODEL_PROTOCOL": "chat", "MODEL_NAME": "mock-provisioner-parallel"}


@pytest.mark.parametrize(
    ("point", "seq"),
    [
        ("after_decide", 1),  # the answer with both calls journaled, neither acted on
        ("after_confirm", 1),  # the first of the pair done, the second not started
        ("before_intent", 2),
        ("after_intent", 2),  # the second in doubt, never sent
        ("after_call", 2),  # the second in doubt, acted
    ],
)
def test_an_answer_with_two_calls_resumes_between_them_without_a_second_answer(
    point: str, seq: int, agent: Agent, conn: Any, mock_servers: Any
) -> None:
    run_id = f"pair-{point}-{seq}"
    env = {**PARALLEL, "MODEL_URL": f"{mock_servers.model_url}/v1"}
    first = agent.run(run_id, CRASH_AT=point, CRASH_SEQ=str(seq), **env)
    assert first.code == EXIT_CRASHED, first.out
    second = agent.run(run_id, **env)
    assert second.code == 0, second.out

    assert mock_servers.calls(run_id) == 3  # server; database + DNS record; the final text
    resources = mock_servers.resources(run_id)
    assert resources["counts"] == {"servers": 1, "databases": 1, "dns_records": 1}
    decisions = conn.execute(
        "SELECT seq, tool, llm_call, call_id FROM decisions WHERE run_id = %s ORDER BY seq",
        (run_id,),
    ).fetchall()
    assert [(d["seq"], d["tool"], d["llm_call"]) for d in decisions] == [
        (0, "create_server", 1),
        (1, "create_database", 2),
        (2, "create_dns_record", 2),  # one answer, two decisions
        (3, "done", 3),
    ]
    assert decisions[1]["call_id"] != decisions[2]["call_id"]
    answers = conn.execute(
        "SELECT llm_call, message FROM model_answers WHERE run_id = %s ORDER BY llm_call",
        (run_id,),
    ).fetchall()
    assert [a["llm_call"] for a in answers] == [1, 2, 3]
    assert [c["id"] for c in answers[1]["message"]["tool_calls"]] == [
        decisions[1]["call_id"],
        decisions[2]["call_id"],
    ]
    keys = sorted(r["key"] for r in resources["resources"])
    assert keys == [f"{run_id}:{i}" for i in range(3)]  # a key of its own per call
    if point == "after_call":
        assert remote_status(second, seq) == "already_done"
    if point in ("after_decide", "after_confirm", "before_intent"):
        # The rest of the pair is read back from the journal: replayed, never decided again.
        pending = seq + 1 if point == "after_confirm" else seq
        assert any(f" seq={pending} " in f"{ln} " for ln in second.lines("replayed")), second.out
        assert not [ln for ln in second.lines("decided") if f" seq={pending} " in f"{ln} "]
