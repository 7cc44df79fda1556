"""Chat Completions runs end to end: a real PostgreSQL, the mock model and cloud in-process,
every request recorded as it went out.

What is checked is what the wire carried and what the journal holds, never how the
runtime builds either, so these tests hold across a rewrite of how the conversation is
assembled: an answer with two tool calls is two decisions and two keyed calls; a crash
between them resumes without a second answer and without re-sending what was confirmed;
and whatever crashed, every request a resumed run sends is, message for message, the
request the uninterrupted run sent at that step.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from agent_runtime.config import Settings
from agent_runtime.crash import CRASH_POINTS, CrashPlan, InjectedCrash, raise_crash
from agent_runtime.loop.outcome import Outcome
from agent_runtime.loop.worker import Worker
from agent_runtime.store import db
from agent_runtime.store.journal import Journal
from mock_remotes import Cloud, Model, cloud_transport, model_transport

from .agents import provisioning_parallel
from .fix_runtime import reset_journal
from .recording import Recording

RUN = "chat-run"
PARALLEL = provisioning_parallel
# seq 0: the server (answer 1); seq 1 and 2: the database and the DNS record (answer 2);
# seq 3: the final text (answer 3).
PAIR = (1, 2)


@dataclass
class Remotes:
    """One fresh mock model and cloud, and what was sent to each."""

    model: Model
    cloud: Cloud
    model_wire: Recording
    cloud_wire: Recording

    def worker(self, conn: db.Connection, crash: CrashPlan | None = None) -> Worker:
        return Worker.build(
            Journal(conn),
            Settings(model_url="http://model/v1"),
            agents=PARALLEL,
            transports={"model": self.model_wire, "cloud": self.cloud_wire},
            crash=crash or CrashPlan(),
            sleep=lambda seconds: None,
        )

    def sends_per_key(self) -> Counter[str]:
        return Counter(e.headers["idempotency-key"] for e in self.cloud_wire.exchanges)


@pytest.fixture
def fresh(tmp_path: Path) -> Iterator[Any]:
    """Makes a fresh pair of remotes each time it is called (same state every time)."""
    opened: list[Cloud] = []

    def make() -> Remotes:
        model = Model()
        cloud = Cloud(tmp_path / f"cloud-{len(opened)}.sqlite3")
        opened.append(cloud)
        return Remotes(
            model=model,
            cloud=cloud,
            model_wire=Recording(model_transport(model)),
            cloud_wire=Recording(cloud_transport(cloud)),
        )

    yield make
    for cloud in opened:
        cloud.close()


def run_through(remotes: Remotes, conn: db.Connection) -> Outcome:
    worker = remotes.worker(conn)
    try:
        return worker.run(RUN, agent=PARALLEL)
    finally:
        worker.close_clients()


def crash_then_resume(remotes: Remotes, conn: db.Connection, point: str, seq: int) -> Outcome:
    """Die at ``point`` on step ``seq`` (a BaseException, as a process death), then restart."""
    first = remotes.worker(conn, CrashPlan(point=point, seq=seq, action=raise_crash))
    with pytest.raises(InjectedCrash):
        first.run(RUN, agent=PARALLEL)
    first.close_clients()
    restart = remotes.worker(conn)
    try:
        return restart.run(RUN, takeover=True)
    finally:
        restart.close_clients()


def rows(conn: db.Connection, sql: str) -> list[dict[str, Any]]:
    return list(conn.execute(sql, (RUN,)).fetchall())


def step_of(body: dict[str, Any]) -> int:
    """Which question of the run a request asks: the answers it already carries."""
    return sum(1 for m in body["messages"] if m["role"] == "assistant")


def test_two_calls_in_one_answer_are_two_decisions_and_two_keyed_calls(
    conn: db.Connection, fresh: Any
) -> None:
    remotes = fresh()
    outcome = run_through(remotes, conn)

    assert (outcome.steps, outcome.llm_calls) == (3, 3)
    answers = rows(conn, "SELECT llm_call, message FROM model_answers WHERE run_id = %s")
    assert sorted(a["llm_call"] for a in answers) == [1, 2, 3]  # three answers, kept once
    sent = [e.answer_json()["choices"][0]["message"] for e in remotes.model_wire.exchanges]
    pair = {a["llm_call"]: a["message"] for a in answers}[2]
    assert pair["tool_calls"] == sent[1]["tool_calls"]  # the answer as it came, ids and all
    decisions = rows(
        conn,
        "SELECT seq, tool, llm_call, call_id FROM decisions WHERE run_id = %s ORDER BY seq",
    )
    assert [(d["seq"], d["tool"], d["llm_call"]) for d in decisions] == [
        (0, "create_server", 1),
        (1, "create_database", 2),
        (2, "create_dns_record", 2),
        (3, "done", 3),
    ]
    assert [d["call_id"] for d in decisions[1:3]] == [c["id"] for c in pair["tool_calls"]]
    calls = rows(
        conn,
        "SELECT seq, idem_key, state, remote_status FROM tool_calls WHERE run_id = %s ORDER BY seq",
    )
    assert [(c["seq"], c["idem_key"], c["state"], c["remote_status"]) for c in calls] == [
        (seq, f"{RUN}:{seq}", "confirmed", "created") for seq in range(3)
    ]
    # Each call of the pair went out once, under its own key, in the model's order.
    assert [e.headers["idempotency-key"] for e in remotes.cloud_wire.exchanges] == [
        f"{RUN}:0",
        f"{RUN}:1",
        f"{RUN}:2",
    ]
    assert [e.path for e in remotes.cloud_wire.exchanges[1:]] == [
        "/v1/databases",
        "/v1/dns_records",
    ]


def test_the_results_of_both_calls_answer_their_own_ids_in_the_next_request(
    conn: db.Connection, fresh: Any
) -> None:
    remotes = fresh()
    run_through(remotes, conn)
    bodies = remotes.model_wire.chat_bodies()
    answer = remotes.model_wire.exchanges[1].answer_json()["choices"][0]["message"]
    ids = [c["id"] for c in answer["tool_calls"]]
    third = bodies[2]["messages"]
    assistant = [i for i, m in enumerate(third) if m["role"] == "assistant"][-1]
    assert third[assistant]["tool_calls"] == answer["tool_calls"]
    results = third[assistant + 1 :]
    assert [(m["role"], m["tool_call_id"]) for m in results] == [("tool", i) for i in ids]
    confirmed = rows(conn, "SELECT seq, result FROM tool_calls WHERE run_id = %s ORDER BY seq")
    db_result, dns_result = confirmed[1]["result"], confirmed[2]["result"]
    assert [json.loads(m["content"]) for m in results] == [db_result, dns_result]
    assert db_result["kind"] == "database" and dns_result["kind"] == "dns_record"


@pytest.mark.parametrize(
    ("point", "seq"),
    [("after_confirm", 1), ("before_intent", 2), ("after_decide", 1)],
)
def test_a_crash_inside_the_pair_resumes_without_asking_again_or_resending_a_confirmed_call(
    point: str, seq: int, conn: db.Connection, fresh: Any
) -> None:
    remotes = fresh()
    outcome = crash_then_resume(remotes, conn, point, seq)

    assert outcome.llm_calls == 3 and remotes.model.calls(RUN) == 3  # never asked again
    assert len(remotes.model_wire.exchanges) == 3
    assert remotes.sends_per_key() == {f"{RUN}:{i}": 1 for i in range(3)}  # nothing twice
    assert remotes.cloud.counts(RUN) == {"servers": 1, "databases": 1, "dns_records": 1}
    decisions = rows(conn, "SELECT seq, llm_call FROM decisions WHERE run_id = %s ORDER BY seq")
    assert [(d["seq"], d["llm_call"]) for d in decisions] == [(0, 1), (1, 2), (2, 2), (3, 3)]


def test_a_crash_after_the_second_call_acted_resends_only_it_under_its_key(
    conn: db.Connection, fresh: Any
) -> None:
    remotes = fresh()
    outcome = crash_then_resume(remotes, conn, "after_call", 2)

    assert outcome.llm_calls == 3 and remotes.model.calls(RUN) == 3
    assert remotes.sends_per_key() == {f"{RUN}:0": 1, f"{RUN}:1": 1, f"{RUN}:2": 2}
    (second,) = rows(conn, "SELECT remote_status FROM tool_calls WHERE run_id = %s AND seq = 2")
    assert second["remote_status"] == "already_done"


# Every crash point that a step reaches: the second call of the pair is decided with the
# first (it has no decide points of its own), the final answer is never acted on.
DECIDE = ("before_decide", "after_decide_before_journal", "after_decide")
ACT = tuple(p for p in CRASH_POINTS if p not in DECIDE)
CRASHES = [(p, s) for s in (0, 1, 3) for p in DECIDE] + [(p, s) for s in (0, *PAIR) for p in ACT]


@pytest.mark.parametrize(("point", "seq"), CRASHES)
def test_a_resumed_run_sends_the_model_what_the_uninterrupted_run_sent_at_each_step(
    point: str, seq: int, conn: db.Connection, fresh: Any
) -> None:
    baseline = fresh()
    expected = run_through(baseline, conn)
    asked = baseline.model_wire.chat_bodies()
    assert [step_of(b) for b in asked] == [0, 1, 2]

    reset_journal(conn)  # the same run id again, from nothing, on remotes as fresh
    resumed = fresh()
    outcome = crash_then_resume(resumed, conn, point, seq)
    bodies = resumed.model_wire.chat_bodies()
    resent = _resent_result(conn, seq) if point == "after_call" else None

    reasked = point == "after_decide_before_journal"
    # Only a crash between an answer and its journal costs a second question for that step.
    assert len(bodies) == len(asked) + (1 if reasked else 0)
    assert sorted({step_of(b) for b in bodies}) == [0, 1, 2]
    for body in bodies:
        step = step_of(body)
        if reasked and step > _answer_of(seq):
            break  # the re-asked answer names things anew (srv-2): the rest may differ
        want = _as_resent(asked[step], resent) if resent else asked[step]
        assert body["messages"] == want["messages"], f"step {step} after {point}"
        assert body == want  # model, tools, tool_choice, user: the whole request
    if not reasked:
        assert (outcome.output, outcome.steps) == (expected.output, expected.steps)


def _resent_result(conn: db.Connection, seq: int) -> str:
    """The call id of ``seq``, whose intent a crash after the call left without a confirm."""
    (row,) = conn.execute(
        "SELECT d.call_id, c.remote_status FROM decisions d JOIN tool_calls c USING (run_id, seq)"
        " WHERE run_id = %s AND seq = %s",
        (RUN, seq),
    ).fetchall()
    assert row["remote_status"] == "already_done"
    call_id: str = row["call_id"]
    return call_id


def _as_resent(body: dict[str, Any], call_id: str) -> dict[str, Any]:
    """``body`` as a run that re-sent ``call_id`` after its remote acted sends it.

    The one difference replay does not remove today: the confirmed result is the remote's
    answer to the re-send, and the mock cloud answers a repeated key with the first result
    marked ``"status": "already_done"`` instead of ``"created"``; the model hears that.
    """
    messages = []
    for message in body["messages"]:
        if message["role"] == "tool" and message["tool_call_id"] == call_id:
            result = json.loads(message["content"])
            assert result["status"] == "created"
            message = {**message, "content": json.dumps({**result, "status": "already_done"})}
        messages.append(message)
    return {**body, "messages": messages}


def _answer_of(seq: int) -> int:
    """The step (question) whose answer decides ``seq``."""
    return {0: 0, 1: 1, 2: 1, 3: 2}[seq]


def test_an_answer_without_tool_calls_ends_the_run_with_its_text_as_output(
    conn: db.Connection, fresh: Any
) -> None:
    remotes = fresh()
    outcome = run_through(remotes, conn)

    final = remotes.model_wire.exchanges[-1].answer_json()["choices"][0]["message"]
    assert "tool_calls" not in final and isinstance(final["content"], str) and final["content"]
    assert outcome.output == final["content"]
    (run,) = rows(conn, "SELECT status, output FROM runs WHERE id = %s")
    assert run == {"status": "done", "output": final["content"]}
    (done,) = rows(
        conn, "SELECT seq, tool, args FROM decisions WHERE run_id = %s AND tool = 'done'"
    )
    assert done == {"seq": 3, "tool": "done", "args": {}}
    # The run is over: another worker asks nothing and reports the same output.
    again = run_through(remotes, conn)
    assert again.output == final["content"] and remotes.model.calls(RUN) == 3
