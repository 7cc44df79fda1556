"""What a step reads and sends: its history in one indexed statement, each part once.

A restart reads the run's history with one statement on the primary keys; a decided
call's arguments are checked once; a question encodes only what the last step added, in
both protocols. Counted (statements sent, ``EXPLAIN``, encodings), never timed.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import psycopg
import pytest

from agent_runtime.config import Settings
from agent_runtime.loop.worker import Worker
from agent_runtime.store import db
from agent_runtime.store.journal import Journal
from agent_runtime.store.queries import query
from agent_runtime.tools.provisioning import agent as provisioning
from agent_runtime.tools.tooldef import Tool
from mock_remotes import Cloud, Model, cloud_transport, model_transport

from .fix_runtime import plan_nodes
from .write_path import STEPS, Counting, provisioning_worker, started_run


def test_a_restart_reads_its_history_in_one_indexed_statement(conn: db.Connection) -> None:
    journal = Journal(conn)
    lease = started_run(journal, "history")
    journal.record_answer(lease, 0, [("create_server", {"name": "srv-1"}, "c0")], message={})
    journal.record_confirm(lease, journal.record_intent(lease, 0), {"id": "i-1"}, "created")
    journal.record_decision(lease, 1, "create_database", {"name": "db-1"})
    with conn.transaction():  # many runs, so that the planner has a choice to make
        conn.execute("INSERT INTO runs (id) SELECT 'other-' || r FROM generate_series(1, 200) r")
        conn.execute(
            "INSERT INTO decisions (run_id, seq, tool, args, llm_call, generation)"
            " SELECT 'other-' || r, s, 'tick', '{}', s + 1, 1"
            " FROM generate_series(1, 200) r, generate_series(0, 49) s"
        )
        conn.execute(
            "INSERT INTO tool_calls (run_id, seq, idem_key, state, generation)"
            " SELECT run_id, seq, run_id || ':' || seq, 'intent', 1 FROM decisions"
            " WHERE run_id LIKE 'other-%%'"
        )
        conn.execute(
            "INSERT INTO model_answers (run_id, llm_call, message, generation)"
            " SELECT run_id, llm_call, '{}', 1 FROM decisions WHERE run_id LIKE 'other-%%'"
        )
    conn.execute("ANALYZE runs, decisions, tool_calls, model_answers")

    Counting.sent.clear()
    conn.cursor_factory = Counting
    try:
        history = journal.history("history")
    finally:
        conn.cursor_factory = psycopg.Cursor
    assert Counting.sent == [query("load_history").as_string(conn)]
    assert sorted(history.decisions) == [0, 1] and sorted(history.calls) == [0]
    assert history.calls[0].result == {"id": "i-1"} and history.answers[1].message == {}

    explain = "EXPLAIN (FORMAT JSON) " + query("load_history").as_string(conn)
    row = conn.execute(explain.replace("%(run)s", "'history'")).fetchone()
    assert row is not None
    nodes = list(plan_nodes(row["QUERY PLAN"][0]["Plan"]))
    scans = [n["Node Type"] for n in nodes if "Scan" in n["Node Type"]]
    indexes = {n["Index Name"] for n in nodes if "Index Name" in n}
    assert "Seq Scan" not in scans, scans
    assert indexes == {"decisions_pkey", "tool_calls_pkey", "model_answers_pkey"}, scans


def test_a_decided_call_has_its_arguments_checked_once(
    conn: db.Connection, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    checks: list[str] = []
    model_of = Tool._model_of

    def counted(self: Tool, args: Any) -> Any:
        checks.append(self.name)
        return model_of(self, args)

    monkeypatch.setattr(Tool, "_model_of", counted)
    with Cloud(tmp_path / "cloud.sqlite3") as cloud:
        worker = provisioning_worker(conn, Model(), cloud)
        outcome = worker.run("checked-once")
        worker.close_clients()
    assert outcome.steps == STEPS
    assert checks == ["create_server", "create_database", "create_dns_record"]


def test_a_question_encodes_only_what_the_last_step_added(
    conn: db.Connection, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from agent_runtime.llm import conversation, models

    encoded: list[int] = []
    sent: list[bytes] = []
    encode = conversation.encoded

    def counted(message: dict[str, Any]) -> bytes:
        encoded.append(1)
        return encode(message)

    monkeypatch.setattr(models, "encoded", counted)
    monkeypatch.setattr(conversation, "encoded", counted)
    body = models.ChatModel.body

    def kept(self: models.ChatModel, question: conversation.Question) -> bytes:
        encoded.clear()
        made = body(self, question)
        sent.append(made)
        per_question.append(len(encoded))
        assert json.loads(made)["messages"] == conversation.messages_of(question)
        return made

    per_question: list[int] = []
    monkeypatch.setattr(models.ChatModel, "body", kept)
    chat = dataclasses.replace(provisioning, protocol="chat", model="mock-provisioner")
    with Cloud(tmp_path / "cloud.sqlite3") as cloud:
        worker = Worker.build(
            Journal(conn),
            Settings(model_url="http://model/v1"),
            agents=chat,
            transports={"model": model_transport(Model()), "cloud": cloud_transport(cloud)},
            sleep=lambda seconds: None,
        )
        assert worker.run("incremental").steps == STEPS
        worker.close_clients()
    # The system and user messages, then per question only the answer and result before it
    # (and the rest of the request); never the whole history again.
    assert per_question == [3, 5, 5, 5], per_question
    assert [json.loads(b)["messages"][-1]["role"] for b in sent] == ["user"] + ["tool"] * 3


def test_the_seed_protocol_sends_each_confirmed_step_encoded_once(
    conn: db.Connection, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from agent_runtime.llm import conversation, models

    encodings: list[int] = []
    per_question: list[tuple[int, list[dict[str, Any]]]] = []
    encode = conversation.encoded

    def counted(message: dict[str, Any]) -> bytes:
        encodings.append(1)
        return encode(message)

    post = models.DecideModel._post

    def sent(self: models.DecideModel, run_id: str, body: Any, headers: Any) -> Any:
        per_question.append((len(encodings), json.loads(body)["history"]))
        encodings.clear()
        return post(self, run_id, body, headers)

    monkeypatch.setattr(models, "encoded", counted)
    monkeypatch.setattr(conversation, "encoded", counted)
    monkeypatch.setattr(models.DecideModel, "_post", sent)
    with Cloud(tmp_path / "cloud.sqlite3") as cloud:
        worker = provisioning_worker(conn, Model(), cloud)
        assert worker.run("steps").steps == STEPS
        worker.close_clients()
    history = Journal(conn).history("steps")
    steps = json.loads(json.dumps(history.confirmed_steps()))
    # Each question encodes the run id and the one step confirmed since the last question.
    assert [n for n, _ in per_question] == [1, 2, 2, 2]
    assert [h for _, h in per_question] == [steps[:i] for i in range(STEPS + 1)]
