"""What a restart does with a call in doubt, per effect contract, with real processes.

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
- ``once``: the restart parks the run (exit 6, ``needs_attention``), sends nothing; the
  operator decides (``resolve --seq 2 --confirm | --redo | --fail``) and the next run
  finishes with exactly the deliveries that decision implies.

And: a worker refuses a run of an agent it does not have (exit 2, the run untouched), and
an answer with several tool calls journals one decision and one key per call, and resumes
between them without a second answer.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from agent_runtime.crash import CRASH_POINTS
from agent_runtime.errors import EXIT_CRASHED, EXIT_NEEDS_ATTENTION, EXIT_USAGE
from agent_runtime.store import clock

from .fix_runtime import Agent, AgentResult
from .operator_cli import cli

LOOKUP, TICKET, EMAIL, FINAL = 0, 1, 2, 3  # the support plan's steps
CRASH_FREE_MODEL_CALLS = 4  # three tools, then the final text
IN_DOUBT = ("after_intent", "after_call")  # where a call's outcome is unknown to the journal


@dataclass
class Desk:
    """Agent processes of ``tests.agents`` against the mocks under uvicorn."""

    runner: Agent
    servers: Any
    database_url: str

    def run(self, run_id: str, agent: str = "support", **env: str) -> AgentResult:
        return self.runner.run(
            run_id,
            "run",
            "--agent",
            f"tests.agents:{agent}",
            SUPPORT_URL=self.servers.support_url,
            MODEL_URL=f"{self.servers.model_url}/v1",
            **env,
        )

    def crash(self, run_id: str, point: str, seq: int, agent: str = "support") -> AgentResult:
        first = self.run(run_id, agent, CRASH_AT=point, CRASH_SEQ=str(seq))
        assert first.code == EXIT_CRASHED, first.out
        assert f"CRASH_AT={point} seq={seq}" in first.out
        return first

    def deliveries(self, run_id: str) -> list[dict[str, Any]]:
        return [d for d in self.servers.deliveries() if d["message_id"].startswith(f"{run_id}:")]

    def tickets(self, run_id: str) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = self.servers.tickets(run_id)
        return found

    def answers(self, op: str, ref: str) -> list[str]:
        """What the desk answered every request of ``op`` about ``ref``, in order."""
        response = httpx.get(
            f"{self.servers.support_url}/v1/answers", params={"op": op, "ref": ref}, timeout=10
        )
        response.raise_for_status()
        return [a["answer"] for a in response.json()["answers"]]

    def calls(self, conn: Any, run_id: str) -> list[dict[str, Any]]:
        rows: list[dict[str, Any]] = conn.execute(
            "SELECT seq, idem_key, state, result, remote_status, effect FROM tool_calls"
            " WHERE run_id = %s ORDER BY seq",
            (run_id,),
        ).fetchall()
        return rows

    def status(self, conn: Any, run_id: str) -> dict[str, Any]:
        row: dict[str, Any] = conn.execute(
            "SELECT status, owner, generation, attempts, failure, agent, output,"
            " lease_expires_at, updated_at FROM runs WHERE id = %s",
            (run_id,),
        ).fetchone()
        return row

    def resolve(self, run_id: str, *args: str) -> Any:
        return cli(self.database_url, "resolve", run_id, *args)


@pytest.fixture
def desk(agent: Agent, mock_servers: Any, database_url: str) -> Desk:
    return Desk(agent, mock_servers, database_url)


def _finished(result: AgentResult) -> None:
    assert result.code == 0, result.out
    assert result.lines("done"), result.out


def _remote(result: AgentResult, seq: int) -> str:
    """The remote status the restart's confirm of ``seq`` logged."""
    line = next(ln for ln in result.lines("confirmed") if f" seq={seq} " in f"{ln} ")
    return line.rsplit("remote=", 1)[1].split()[0]


# -- read --------------------------------------------------------------------------------------


@pytest.mark.parametrize("point", IN_DOUBT)
def test_a_read_in_doubt_is_simply_called_again(point: str, desk: Desk, conn: Any) -> None:
    run_id = f"read-{point}"
    desk.crash(run_id, point, LOOKUP)
    looked = desk.answers("lookup_order", "A-1001")
    assert looked == ([] if point == "after_intent" else ["found"])

    second = desk.run(run_id)
    _finished(second)
    assert desk.answers("lookup_order", "A-1001") == [*looked, "found"]  # called again
    assert _remote(second, LOOKUP) == "read"
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
    _finished(second)
    assert _remote(second, TICKET) == remote
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
    _finished(second)
    assert _remote(second, EMAIL) == "found"
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
    _finished(second)
    assert _remote(second, EMAIL) == "created"
    assert desk.answers("check_message", key) == ["absent"]  # asked first ...
    assert desk.answers("send_email", key) == ["delivered"]  # ... then sent, once
    assert [d["message_id"] for d in desk.deliveries(run_id)] == [key]
    assert desk.calls(conn, run_id)[EMAIL]["remote_status"] == "created"


# -- once --------------------------------------------------------------------------------------


def _parked(desk: Desk, conn: Any, run_id: str, point: str) -> AgentResult:
    """Crash the once agent at ``point`` on the email, restart it: it must park."""
    desk.crash(run_id, point, EMAIL, agent="support_once")
    sent = len(desk.deliveries(run_id))
    assert sent == (0 if point == "after_intent" else 1)
    second = desk.run(run_id, "support_once")
    assert second.code == EXIT_NEEDS_ATTENTION, second.out
    assert second.lines("needs-attention"), second.out
    assert f"resolve {run_id} --seq {EMAIL}" in second.out
    run = desk.status(conn, run_id)
    assert (run["status"], run["owner"], run["lease_expires_at"]) == (
        "needs_attention",
        None,
        None,
    )
    call = desk.calls(conn, run_id)[EMAIL]
    assert (call["effect"], call["state"], call["result"]) == ("once", "intent", None)
    assert len(desk.deliveries(run_id)) == sent  # the restart sent nothing
    assert desk.answers("send_email", f"{run_id}:{EMAIL}") == ["delivered"] * sent
    _past_landing(conn, run_id)
    return second


def _past_landing(conn: Any, run_id: str) -> None:
    """Move the clock past the moment the crashed send could still act (its lands_by): an
    operator's --redo or --fail is refused before it. The clock stops first, so what the
    operator's command finds expired never depends on how fast the machine is."""
    row = conn.execute(
        "SELECT greatest(0, extract(epoch FROM max(lands_by) - cr_now()))::float AS wait"
        " FROM tool_calls WHERE run_id = %s",
        (run_id,),
    ).fetchone()
    clock.freeze(conn)
    clock.advance(conn, row["wait"] + 0.01)


@pytest.mark.parametrize("point", IN_DOUBT)
def test_a_once_call_in_doubt_parks_the_run_and_no_restart_sends_it(
    point: str, desk: Desk, conn: Any
) -> None:
    run_id = f"once-{point}"
    _parked(desk, conn, run_id, point)
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
    _parked(desk, conn, run_id, "after_call")
    (delivery,) = desk.deliveries(run_id)  # the operator looks in the mailbox: it went out
    resolved = desk.resolve(run_id, "--seq", str(EMAIL), "--confirm", json.dumps(delivery))
    assert resolved.code == 0, resolved.stderr
    assert desk.status(conn, run_id)["status"] == "pending"

    third = desk.run(run_id, "support_once")
    _finished(third)
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
    _parked(desk, conn, run_id, "after_intent")
    resolved = desk.resolve(run_id, "--seq", str(EMAIL), "--redo", "--reason", "not in the outbox")
    assert resolved.code == 0, resolved.stderr
    assert desk.calls(conn, run_id)[EMAIL]["state"] == "redo"

    third = desk.run(run_id, "support_once")
    _finished(third)
    assert "effect=redo ordered by an operator" in third.lines("resending")[0]
    assert [d["message_id"] for d in desk.deliveries(run_id)] == [f"{run_id}:{EMAIL}"]
    call = desk.calls(conn, run_id)[EMAIL]
    assert (call["state"], call["remote_status"]) == ("confirmed", "created")
    assert desk.status(conn, run_id)["status"] == "done"


def test_a_redo_that_crashes_after_its_send_parks_again_instead_of_sending_twice(
    desk: Desk, conn: Any
) -> None:
    run_id = "once-redo-twice"
    _parked(desk, conn, run_id, "after_intent")
    assert desk.resolve(run_id, "--seq", str(EMAIL), "--redo").code == 0
    redo = desk.run(run_id, "support_once", CRASH_AT="after_call", CRASH_SEQ=str(EMAIL))
    assert redo.code == EXIT_CRASHED, redo.out
    assert len(desk.deliveries(run_id)) == 1  # the redo went out; its confirm did not

    fourth = desk.run(run_id, "support_once")
    assert fourth.code == EXIT_NEEDS_ATTENTION, fourth.out  # in doubt again: not re-sent
    assert len(desk.deliveries(run_id)) == 1
    (delivery,) = desk.deliveries(run_id)
    assert desk.resolve(run_id, "--seq", str(EMAIL), "--confirm", json.dumps(delivery)).code == 0
    _finished(desk.run(run_id, "support_once"))
    assert len(desk.deliveries(run_id)) == 1


def test_a_parked_send_failed_by_the_operator_is_seen_by_the_model_which_sends_anew(
    desk: Desk, conn: Any
) -> None:
    run_id = "once-fail"
    _parked(desk, conn, run_id, "after_intent")
    resolved = desk.resolve(run_id, "--seq", str(EMAIL), "--fail", "--reason", "bounced")
    assert resolved.code == 0, resolved.stderr

    third = desk.run(run_id, "support_once")
    _finished(third)
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


# -- the other crash points: nothing is in doubt, so the contract changes nothing ----------------


@pytest.mark.parametrize("point", [p for p in CRASH_POINTS if p not in IN_DOUBT])
@pytest.mark.parametrize("who", ["support", "support_once"])
def test_a_crash_anywhere_else_on_the_email_step_finishes_with_one_of_everything(
    point: str, who: str, desk: Desk, conn: Any
) -> None:
    run_id = f"{who}-{point}"
    desk.crash(run_id, point, EMAIL, agent=who)
    _finished(desk.run(run_id, who))
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

    _finished(desk.run(run_id))  # the worker that has the agent finishes it
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
        assert _remote(second, seq) == "already_done"
    if point in ("after_decide", "after_confirm", "before_intent"):
        # The rest of the pair is read back from the journal: replayed, never decided again.
        pending = seq + 1 if point == "after_confirm" else seq
        assert any(f" seq={pending} " in f"{ln} " for ln in second.lines("replayed")), second.out
        assert not [ln for ln in second.lines("decided") if f" seq={pending} " in f"{ln} "]
