"""What a step costs the database: one WAL flush, the run row left alone, one history read.

Counted by the server itself (``pg_stat_wal``, ``pg_stat_database``, the row's version,
``EXPLAIN``), never timed: speed figures belong in ``bench/``.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any, ClassVar

import psycopg
import pytest
from psycopg.conninfo import make_conninfo

from agent_runtime.config import Settings
from agent_runtime.errors import EXIT_DONE
from agent_runtime.loop.worker import Worker
from agent_runtime.operator.cursor import FIRST_PAGE
from agent_runtime.operator.snapshot import STATUSES
from agent_runtime.store import clock, db
from agent_runtime.store.journal import Journal
from agent_runtime.store.queries import query
from agent_runtime.store.records import Lease, RunTask
from agent_runtime.supervisor.workerpool import run_leased
from agent_runtime.tools.provisioning import agent as provisioning
from agent_runtime.tools.tooldef import Tool
from mock_remotes import Cloud, Model, cloud_transport, model_transport

from .fix_runtime import plan_nodes

STEPS = 3  # the provisioning agent's tool steps
RUNS = 6
# Durable commits of a run besides its steps: create, claim, finish.
FIXED = 3


@pytest.fixture
def meter(database_url: str) -> Iterator[db.Connection]:
    """A connection to another database of the same server, to read the counters from
    (reading them there counts no transaction here)."""
    with db.connection(make_conninfo(database_url, dbname="postgres")) as c:
        yield c


def _published(conn: db.Connection) -> None:
    conn.execute("SELECT pg_stat_force_next_flush()")


def _wal_syncs(meter: db.Connection, *flush: db.Connection) -> int:
    for conn in flush:
        _published(conn)
    row = meter.execute("SELECT wal_sync FROM pg_stat_wal").fetchone()
    assert row is not None
    return int(row["wal_sync"])


def _worker(conn: db.Connection, model: Model, cloud: Cloud) -> Worker:
    return Worker.build(
        Journal(conn),
        Settings(model_url="http://model/v1"),
        agents=provisioning,
        transports={"model": model_transport(model), "cloud": cloud_transport(cloud)},
        sleep=lambda seconds: None,
    )


def test_a_step_waits_for_one_wal_flush(
    conn: db.Connection, meter: db.Connection, tmp_path: Path
) -> None:
    with Cloud(tmp_path / "cloud.sqlite3") as cloud:
        worker = _worker(conn, Model(), cloud)
        worker.run("warm")
        before = _wal_syncs(meter, conn)
        for i in range(RUNS):
            assert worker.run(f"flush-{i}").steps == STEPS
        syncs = _wal_syncs(meter, conn) - before
        worker.close_clients()
    per_step = (syncs / RUNS - FIXED) / STEPS
    # One flush a step is the intent's (it flushes the decision before it). The WAL writer
    # flushing a relaxed commit on its own now and then may add a little; two a step (a
    # durable decision and a durable intent) may not.
    assert 0.9 <= per_step <= 1.4, f"{syncs} WAL flushes in {RUNS} runs: {per_step:.2f} a step"


def _started(journal: Journal, run_id: str) -> Lease:
    journal.create_run(run_id)
    lease = journal.claim(run_id, "owner-1", 60.0)
    assert lease is not None
    return lease


def _commit_setting(conn: db.Connection) -> str:
    row = conn.execute("SHOW synchronous_commit").fetchone()
    assert row is not None
    return str(row["synchronous_commit"])


def test_the_decision_commits_without_waiting_and_what_acts_on_it_waits(
    conn: db.Connection,
) -> None:
    journal = Journal(conn)
    lease = _started(journal, "commits")
    seen: dict[str, str] = {}
    with conn.transaction():
        journal.record_decision(lease, 0, "create_server", {"name": "srv-1"})
        seen["decision"] = _commit_setting(conn)
    with conn.transaction():
        keyed = journal.record_intent(lease, 0, "keyed")
        seen["intent"] = _commit_setting(conn)
    with conn.transaction():
        journal.record_confirm(lease, keyed, {"id": "i-1"}, "created")
        seen["keyed confirm"] = _commit_setting(conn)
    journal.record_decision(lease, 1, "send_email", {"to": "a@example.test"})
    once = journal.record_intent(lease, 1, "once")
    with conn.transaction():
        journal.record_confirm(lease, once, {"id": "m-1"}, "created")
        seen["once confirm"] = _commit_setting(conn)
    assert seen == {
        "decision": "off",  # the intent's durable commit flushes it
        "intent": "on",  # the call goes out after it
        "keyed confirm": "off",  # lost: one re-send answered already_done
        "once confirm": "on",  # lost, it would park a run whose call was done
    }
    assert _commit_setting(conn) == "on"  # SET LOCAL: the session keeps its own


def _row_version(conn: db.Connection, run_id: str) -> tuple[str, str]:
    row = conn.execute(
        "SELECT xmin::text AS xmin, ctid::text AS ctid FROM runs WHERE id = %(run)s",
        {"run": run_id},
    ).fetchone()
    assert row is not None
    return row["xmin"], row["ctid"]


def test_only_a_new_answer_and_the_first_progress_rewrite_the_run_row(
    conn: db.Connection,
) -> None:
    journal = Journal(conn)
    lease = _started(journal, "quiet")
    journal.record_decision(lease, 0, "create_server", {"name": "srv-1"})
    first = journal.record_intent(lease, 0)
    journal.record_confirm(lease, first, {"id": "i-1"}, "created")  # progress since the claim
    run = journal.require_run("quiet")
    assert (run.attempts, run.llm_calls) == (0, 1)
    journal.record_decision(lease, 1, "create_database", {"name": "db-1"})
    answered = _row_version(conn, "quiet")
    second = journal.record_intent(lease, 1)
    assert _row_version(conn, "quiet") == answered  # locked while written, not rewritten
    journal.record_confirm(lease, second, {"id": "d-1"}, "created")
    assert _row_version(conn, "quiet") == answered  # attempts already 0: nothing to write
    assert journal.require_run("quiet").llm_calls == 2


class Counting(psycopg.Cursor[Any]):
    """A cursor that notes every statement it sends (the server still runs them all)."""

    sent: ClassVar[list[str]] = []

    def execute(self, query: Any, params: Any = None, **kw: Any) -> Any:
        Counting.sent.append(query.as_string(self) if hasattr(query, "as_string") else query)
        return super().execute(query, params, **kw)


def test_a_restart_reads_its_history_in_one_indexed_statement(conn: db.Connection) -> None:
    journal = Journal(conn)
    lease = _started(journal, "history")
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
        worker = _worker(conn, Model(), cloud)
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
        worker = _worker(conn, Model(), cloud)
        assert worker.run("steps").steps == STEPS
        worker.close_clients()
    history = Journal(conn).history("steps")
    steps = json.loads(json.dumps(history.confirmed_steps()))
    # Each question encodes the run id and the one step confirmed since the last question.
    assert [n for n, _ in per_question] == [1, 2, 2, 2]
    assert [h for _, h in per_question] == [steps[:i] for i in range(STEPS + 1)]


@pytest.mark.usefixtures("frozen_clock")
def test_a_step_refreshes_the_runs_activity_at_most_once_a_minute(conn: db.Connection) -> None:
    """runs.updated_at orders `runs` (migration 0011). A decision within a minute of the run
    row's last change (here the first confirm after the claim, which writes progress)
    leaves it as it was, so the step's update stays HOT; one a minute later moves it. The
    list shows the latest intent or confirm either way."""
    journal = Journal(conn)
    lease = _started(journal, "active")

    def step(seq: int) -> datetime:
        journal.record_decision(lease, seq, "create_server", {"name": f"srv-{seq}"})
        call = journal.record_intent(lease, seq)
        confirmed = journal.record_confirm(lease, call, {"id": seq}, "created").confirmed_at
        assert confirmed is not None
        return confirmed

    progressed = step(0)
    clock.advance(conn, 30.0)
    second = step(1)
    assert journal.require_run("active").updated_at == progressed  # the row's index keys stay
    params = {"statuses": list(STATUSES), "agent": None, "limit": None, **FIRST_PAGE}
    (listed,) = db.run(conn, "operator_list_runs", params)
    assert (listed["activity"], listed["updated_at"]) == (progressed, second)
    clock.advance(conn, 60.0)
    third = step(2)
    assert journal.require_run("active").updated_at == third  # the clock stands still
    (listed,) = db.run(conn, "operator_list_runs", params)
    assert listed["activity"] == listed["updated_at"] == third


CLAIM_PARAMS = {"owner": "sup", "lease": 30.0, "limit": 2, "max_attempts": 10, "agents": None}


def test_the_sweep_claims_from_a_backlog_in_index_order_without_sorting_it(
    conn: db.Connection,
) -> None:
    """A supervisor with thousands of runs waiting claims a few at every sweep: the plan
    walks ``runs_claim_order`` and stops at the limit instead of sorting the backlog (only
    the claimed rows are sorted, into claim order); finished runs are not in that index at
    all. The search for runs that used up their attempts reads ``runs_attempts``, not
    every waiting run."""
    conn.execute(
        "INSERT INTO runs (id, status) SELECT 'done-' || g, 'done' FROM generate_series(1, 3000) g"
    )
    conn.execute("INSERT INTO runs (id) SELECT 'wait-' || g FROM generate_series(1, 3000) g")
    conn.execute("ANALYZE runs")
    explain = psycopg.sql.SQL("EXPLAIN (FORMAT JSON) ") + query("claim_expired")
    conn.execute("BEGIN")
    try:
        row = conn.execute(explain, CLAIM_PARAMS).fetchone()
    finally:
        conn.execute("ROLLBACK")
    assert row is not None
    nodes = list(plan_nodes(row["QUERY PLAN"][0]["Plan"]))
    sorted_keys = [key for n in nodes if n["Node Type"] == "Sort" for key in n["Sort Key"]]
    assert all(key.startswith("claimed.") for key in sorted_keys), sorted_keys  # the few claimed
    assert "runs_claim_order" in {n.get("Index Name") for n in nodes}
    give_up = psycopg.sql.SQL("EXPLAIN (FORMAT JSON) ") + query("give_up_exhausted")
    row = conn.execute(give_up, {"max_attempts": 10, "give_up_after": 300.0}).fetchone()
    assert row is not None
    scans = list(plan_nodes(row["QUERY PLAN"][0]["Plan"]))
    on_runs = [n for n in scans if n.get("Relation Name") == "runs" and "Scan" in n["Node Type"]]
    assert "Seq Scan" not in {n["Node Type"] for n in on_runs}
    assert "runs_attempts" in {n.get("Index Name") for n in scans}

    claimed = db.run(conn, "claim_expired", CLAIM_PARAMS)
    oldest = conn.execute(
        "SELECT id FROM runs WHERE id LIKE 'wait-%' ORDER BY created_at, id LIMIT 2"
    ).fetchall()
    assert sorted(r["id"] for r in claimed) == sorted(r["id"] for r in oldest)


def test_a_run_handed_over_with_its_claim_is_not_read_again(
    conn: db.Connection, tmp_path: Path
) -> None:
    """The supervisor's claim reads the run's agent and input; a pool worker given them
    adopts the lease and reads the history, but never the run row itself."""
    journal = Journal(conn)
    journal.create_run("handed", "provisioning", "three boxes, please")
    (row,) = db.run(conn, "claim_expired", {**CLAIM_PARAMS, "limit": 1})
    assert (row["agent"], row["input"]) == ("provisioning", "three boxes, please")
    lease = Lease(run_id=row["id"], owner=row["owner"], generation=row["generation"])
    with Cloud(tmp_path / "cloud.sqlite3") as cloud:
        worker = _worker(conn, Model(), cloud)
        Counting.sent.clear()
        conn.cursor_factory = Counting
        try:
            code, fit = run_leased(worker, lease, RunTask(agent=row["agent"], input=row["input"]))
        finally:
            conn.cursor_factory = psycopg.Cursor
            worker.close_clients()
    assert (code, fit) == (EXIT_DONE, True)
    assert query("get_run").as_string(conn) not in Counting.sent
    assert query("adopt_lease").as_string(conn) in Counting.sent
    assert query("load_history").as_string(conn) not in Counting.sent  # it had no steps
    assert journal.require_run("handed").status == "done"


def test_an_adoption_reads_no_history_only_where_there_is_none(conn: db.Connection) -> None:
    """A run's first worker learns from its adoption that there is nothing to read; one
    that takes a run with a decision but no call yet must read it."""
    journal = Journal(conn)
    for run_id in ("fresh", "decided"):
        journal.create_run(run_id)
    rows = {r["id"]: r for r in db.run(conn, "claim_expired", CLAIM_PARAMS)}
    leases = {
        run_id: Lease(run_id=run_id, owner=r["owner"], generation=r["generation"])
        for run_id, r in rows.items()
    }
    journal.record_decision(leases["decided"], 0, "create_server", {"name": "a"})
    fresh, history = journal.adopt(leases["fresh"], "w:1:a")
    assert fresh.owner == "w:1:a" and history is not None and not history.decisions
    decided, history = journal.adopt(leases["decided"], "w:1:b")
    assert decided.owner == "w:1:b" and history is None


def test_a_renewal_rewrites_the_run_row_in_place(conn: db.Connection) -> None:
    """A heartbeat changes only the lease's expiry, which no index holds: a HOT update,
    with no index entry written for it."""
    journal = Journal(conn)
    lease = _started(journal, "renewed")
    counted = "SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_xact_user_tables WHERE relname = 'runs'"
    with conn.transaction():  # this backend's counts not yet flushed: compare before, after
        before = conn.execute(counted).fetchone()
        journal.renew(lease, 60.0)
        after = conn.execute(counted).fetchone()
    assert before is not None and after is not None
    assert after["n_tup_upd"] - before["n_tup_upd"] == 1
    assert after["n_tup_hot_upd"] - before["n_tup_hot_upd"] == 1


def test_the_sweep_hands_out_its_claims_longest_idle_first(conn: db.Connection) -> None:
    """The rows come in claim order, whatever the table's layout: here the run stored
    first is the one idle for the shortest time."""
    conn.execute(
        "INSERT INTO runs (id, updated_at) SELECT 'idle-' || g, cr_now() - g * interval '1 s' "
        "FROM generate_series(1, 4) g ORDER BY g"
    )
    with conn.transaction():  # a plan whose join walks the table, not the claim's order
        conn.execute("SET LOCAL enable_nestloop = off")
        claimed = db.run(conn, "claim_expired", {**CLAIM_PARAMS, "limit": 4})
    assert [r["id"] for r in claimed] == ["idle-4", "idle-3", "idle-2", "idle-1"]
