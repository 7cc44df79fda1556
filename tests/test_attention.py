"""Runs that need attention, from the operator's side: seeing them, and deciding their call.

A run is parked (``needs_attention``) when a restart found a ``once`` call in doubt. Here
parked runs are made through the journal (what a restart writes; the real processes that
park them are tests/test_contracts_once.py), and every operator command runs as a real process
against real PostgreSQL. Time moves through ``cr_now()``'s skew, never by sleeping.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from agent_runtime.config import Settings
from agent_runtime.errors import EXIT_NOT_OWNER, EXIT_USAGE
from agent_runtime.store import clock, db
from agent_runtime.store.journal import Journal
from agent_runtime.store.records import Lease
from agent_runtime.supervisor.main import Supervisor

from .agents import support_once
from .operator_cli import SVG, Out, cli

LEASE = 12.0  # seconds
EMAIL = {"to": "ada@example.test", "subject": "Ticket T-0000001", "body": "Hello Ada"}
PARKED = "tool send_email is 'once' and its call may have acted: call p1:1 is in doubt"


def _parked(journal: Journal, run_id: str, *, attempts: int = 1) -> Lease:
    """A run whose restart found its 'once' call seq 1 in doubt, as acting.py leaves it."""
    journal.create_run(run_id, "support-once", "Order A-1001 arrived broken")
    lease = journal.claim(run_id, "w:1:x", LEASE)
    assert lease is not None
    journal.record_decision(lease, 0, "lookup_order", {"order_id": "A-1001"})
    done = journal.record_intent(lease, 0, "read")
    journal.record_confirm(lease, done, {"id": "A-1001", "email": "ada@example.test"}, "read")
    journal.record_decision(lease, 1, "send_email", dict(EMAIL))
    journal.record_intent(lease, 1, "once")
    for _ in range(attempts):  # claims since that progress: a restart that parks is one
        assert journal.release(lease, "ModelUnavailable: down", delay=0.0)
        claimed = journal.claim(run_id, "w:1:x", LEASE)
        assert claimed is not None
        lease = claimed
    journal.park(lease, PARKED.replace("p1", run_id))
    assert journal.require_run(run_id).attempts == attempts
    return lease


def _row(conn: Any, run_id: str) -> dict[str, Any]:
    row: dict[str, Any] = conn.execute(
        "SELECT status, owner, generation, attempts, failure, lease_expires_at, updated_at,"
        " progress_at FROM runs WHERE id = %s",
        (run_id,),
    ).fetchone()
    return row


def _call(conn: Any, run_id: str, seq: int) -> dict[str, Any]:
    row: dict[str, Any] = conn.execute(
        "SELECT state, result, remote_status, confirmed_at, confirm_generation, effect"
        " FROM tool_calls WHERE run_id = %s AND seq = %s",
        (run_id, seq),
    ).fetchone()
    return row


def _resolutions(conn: Any, run_id: str) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = conn.execute(
        "SELECT seq, choice, reason, result, parked_reason FROM call_resolutions"
        " WHERE run_id = %s ORDER BY id",
        (run_id,),
    ).fetchall()
    return rows


# -- seeing them -------------------------------------------------------------------------------


def test_runs_lists_parked_runs_and_filters_them_by_status(conn: Any, database_url: str) -> None:
    journal = Journal(conn)
    _parked(journal, "p1")
    journal.create_run("fresh")

    listed = cli(database_url, "runs", "--status", "needs_attention", "--json")
    assert listed.code == 0, listed.stderr
    (parked,) = listed.json()["runs"]
    assert (parked["id"], parked["status"], parked["agent"]) == (
        "p1",
        "needs_attention",
        "support-once",
    )
    assert (parked["in_doubt"], parked["first_in_doubt"], parked["owner"]) == (1, 1, None)

    table = cli(database_url, "runs")
    assert table.code == 0, table.stderr
    row = next(ln for ln in table.stdout.splitlines() if ln.startswith("p1 "))
    assert "needs_attention" in row
    assert "needs attention: p1:" in table.stdout
    assert "`resolve p1 --seq 1 --confirm JSON | --redo | --fail` decides" in table.stdout


def test_show_names_the_call_in_doubt_says_nothing_can_tell_and_what_each_choice_means(
    conn: Any, database_url: str, tmp_path: Path
) -> None:
    _parked(Journal(conn), "p1")

    text = cli(database_url, "show", "p1")
    assert text.code == 0, text.stderr
    out = text.stdout
    assert "run p1  needs_attention" in out and "agent support-once" in out
    assert "key p1:1  effect once" in out and "confirm   none: IN DOUBT" in out
    verdict = next(ln for ln in out.splitlines() if ln.strip().startswith("seq 1: intent"))
    assert "nothing can tell whether it acted" in verdict
    assert "no worker sends it again on its own" in verdict
    section = out.split("\nneeds attention\n", 1)[1]
    assert "seq 1 (send_email, key p1:1, effect once) is in doubt" in section
    for command, meaning in [
        ("resolve p1 --seq 1 --confirm JSON", "the call acted: JSON is its result"),
        ("resolve p1 --seq 1 --redo", "the next worker sends it once more, under key p1:1"),
        ("resolve p1 --seq 1 --fail [--reason TEXT]", "the model sees that failure"),
    ]:
        assert command in section and meaning in section
    assert "needs attention since" in out.split("\nstate\n", 1)[1]

    data = cli(database_url, "show", "p1", "--json").json()
    attention = data["attention"]
    assert (attention["seq"], attention["key"], attention["tool"], attention["effect"]) == (
        1,
        "p1:1",
        "send_email",
        "once",
    )
    assert sorted(attention["choices"]) == ["confirm", "fail", "redo"]
    assert attention["reason"].startswith("tool send_email is 'once'")
    assert data["steps"][1]["effect"] == "once" and data["steps"][1]["state"] == "in_doubt"

    picture = tmp_path / "parked.svg"
    assert cli(database_url, "show", "p1", "--svg", str(picture)).code == 0
    root = ET.parse(picture).getroot()
    kinds = [g.get("data-kind") for g in root.iter(f"{SVG}g") if g.get("data-kind")]
    assert kinds[-1] == "attention"
    texts = " ".join(t.text or "" for t in root.iter(f"{SVG}text"))
    assert "needs attention" in texts and "nothing can tell whether it acted" in texts


def test_resolve_without_seq_explains_the_three_choices_and_changes_nothing(
    conn: Any, database_url: str
) -> None:
    _parked(Journal(conn), "p1")
    before = (_row(conn, "p1"), _call(conn, "p1", 1))

    out = cli(database_url, "resolve", "p1")
    assert out.code == EXIT_USAGE, out.stderr
    assert "run p1 needs attention; nothing was sent or changed" in out.stdout
    for tail in ("--confirm JSON", "--redo", "--fail [--reason TEXT]"):
        assert f"python -m agent_runtime resolve p1 --seq 1 {tail}" in out.stdout
    assert "Traceback" not in out.stdout + out.stderr

    data = cli(database_url, "resolve", "p1", "--json")
    assert data.code == EXIT_USAGE
    assert sorted(data.json()["choices"]) == ["confirm", "fail", "redo"]
    assert (_row(conn, "p1"), _call(conn, "p1", 1)) == before


# -- deciding ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "state", "remote"),
    [
        (("--confirm", '{"id": "M-0000001", "status": "delivered"}'), "confirmed", "operator"),
        (("--redo",), "redo", None),
        (("--fail", "--reason", "the address bounced"), "failed", "operator"),
    ],
    ids=["confirm", "redo", "fail"],
)
def test_each_choice_resolves_the_call_puts_the_run_back_and_stays_in_its_history(
    args: tuple[str, ...], state: str, remote: str | None, conn: Any, database_url: str
) -> None:
    _parked(Journal(conn), "p1", attempts=3)
    parked = _row(conn, "p1")

    out = cli(database_url, "resolve", "p1", "--seq", "1", *args, "--json")
    assert out.code == 0, out.stderr
    choice = args[0].removeprefix("--")
    assert (out.json()["choice"], out.json()["state"]) == (choice, state)

    run = _row(conn, "p1")
    assert (run["status"], run["owner"], run["lease_expires_at"], run["failure"]) == (
        "pending",
        None,
        None,
        None,
    )
    assert run["attempts"] == 0 and run["progress_at"] > parked["progress_at"]
    assert run["generation"] == parked["generation"]  # no claim: the next one is handed_back
    call = _call(conn, "p1", 1)
    assert (call["state"], call["remote_status"], call["confirm_generation"]) == (
        state,
        remote,
        None,
    )
    if choice == "confirm":
        assert call["result"] == {"id": "M-0000001", "status": "delivered"}
    elif choice == "fail":
        assert call["result"]["error"] == "failed_by_operator"
        assert "the address bounced" in call["result"]["message"]
    else:
        assert call["result"] is None and call["confirmed_at"] is None
    (record,) = _resolutions(conn, "p1")
    assert (record["seq"], record["choice"]) == (1, choice)
    assert record["parked_reason"] == parked["failure"]

    shown = cli(database_url, "show", "p1")
    history = shown.stdout
    assert "resolved by an operator" in history
    assert f"seq 1  {choice}" in history.split("\nresolved by an operator\n", 1)[1]
    assert "put back to pending by an operator" in history
    data = cli(database_url, "show", "p1", "--json").json()
    assert data["attention"] is None and data["in_doubt"] == []
    kinds = [e["kind"] for e in data["events"]]
    assert kinds.index("attention") < kinds.index("resolved")
    resolved = next(e for e in data["events"] if e["kind"] == "resolved")
    assert resolved["generation"] is None and resolved["seq"] == 1  # the operator's lane
    assert data["resolutions"][0]["choice"] == choice


def test_a_resolved_run_is_claimed_again_and_the_confirm_is_the_models_result(
    conn: Any, database_url: str
) -> None:
    journal = Journal(conn)
    _parked(journal, "p1")
    assert cli(database_url, "resolve", "p1", "--seq", "1", "--confirm", '{"id": "M-7"}').code == 0
    lease = journal.claim("p1", "w:2:y", LEASE)
    assert lease is not None
    reason = conn.execute(
        "SELECT reason FROM run_claims WHERE run_id = 'p1' AND generation = %s",
        (lease.generation,),
    ).fetchone()["reason"]
    assert reason == "handed_back"
    history = journal.history("p1")
    assert history.stranded() == []  # nothing left in doubt for the next worker
    assert history.calls[1].result == {"id": "M-7"}


@pytest.mark.parametrize(
    ("args", "code", "said"),
    [
        (("--seq", "1"), EXIT_USAGE, "--seq 1 needs a choice"),
        (("--redo",), EXIT_USAGE, "--redo needs --seq N"),
        (("--seq", "1", "--confirm", "{not json"), EXIT_USAGE, "the result of the call as JSON"),
        (("--seq", "1", "--confirm", "null"), EXIT_USAGE, "--confirm null would record no result"),
        (("--seq", "1", "--confirm", "NaN"), EXIT_USAGE, "NaN is not JSON"),
        (("--seq", "7", "--redo"), EXIT_USAGE, "run p1 has no tool call seq 7 (its calls: 0, 1)"),
        (("--seq", "0", "--redo"), EXIT_NOT_OWNER, "call seq 0 of run p1 is already resolved"),
        (("--seq", "1", "--fail", "--takeover"), EXIT_USAGE, "a parked run, which nobody holds"),
        (("--reason", "why"), EXIT_USAGE, "--reason goes with --seq N"),
        (("--seq", "-1", "--redo"), EXIT_USAGE, "a step number is 0 or more"),
        (("--seq", "1", "--redo", "--fail"), EXIT_USAGE, "not allowed with argument"),
    ],
    ids=[
        "no-choice",
        "no-seq",
        "bad-json",
        "null",
        "nan",
        "no-such-call",
        "already-resolved",
        "takeover",
        "reason-alone",
        "negative-seq",
        "two-choices",
    ],
)
def test_a_wrong_resolve_is_refused_clearly_and_changes_nothing(
    args: tuple[str, ...], code: int, said: str, conn: Any, database_url: str
) -> None:
    _parked(Journal(conn), "p1")
    before = (_row(conn, "p1"), _call(conn, "p1", 0), _call(conn, "p1", 1))
    out = cli(database_url, "resolve", "p1", *args)
    assert out.code == code, out.stderr
    assert said in out.stderr
    assert "Traceback" not in out.stderr and out.stdout == ""
    assert (_row(conn, "p1"), _call(conn, "p1", 0), _call(conn, "p1", 1)) == before
    assert _resolutions(conn, "p1") == []


def test_a_call_is_resolved_once_and_only_on_a_parked_run(conn: Any, database_url: str) -> None:
    journal = Journal(conn)
    _parked(journal, "p1")
    first = cli(database_url, "resolve", "p1", "--seq", "1", "--redo")
    assert first.code == 0, first.stderr
    again = cli(database_url, "resolve", "p1", "--seq", "1", "--confirm", "{}")
    assert again.code == EXIT_NOT_OWNER
    assert "run p1 is pending, not needs_attention" in again.stderr
    assert "ordered sent again by an operator (redo)" in again.stderr
    assert len(_resolutions(conn, "p1")) == 1

    journal.create_run("live")  # a running run's intent is its worker's to resolve
    lease = journal.claim("live", "w:1:x", LEASE)
    assert lease is not None
    journal.record_decision(lease, 0, "send_email", dict(EMAIL))
    journal.record_intent(lease, 0, "once")
    busy = cli(database_url, "resolve", "live", "--seq", "0", "--fail")
    assert busy.code == EXIT_NOT_OWNER
    assert "run live is running, not needs_attention" in busy.stderr
    assert _call(conn, "live", 0)["state"] == "intent"

    missing = cli(database_url, "resolve", "nope", "--seq", "0", "--redo")
    assert missing.code == EXIT_USAGE and "no run with id 'nope'" in missing.stderr


# -- nothing else touches them -----------------------------------------------------------------


def test_the_supervisor_neither_claims_nor_gives_up_a_parked_run(
    conn: Any, database_url: str
) -> None:
    clock.freeze(conn)
    journal = Journal(conn)
    _parked(journal, "p1", attempts=9)
    journal.create_run("spent", "support-once")  # the control: exhausted, not parked
    for _ in range(9):
        spent = journal.claim("spent", "w:1:x", LEASE)
        assert spent is not None
        assert journal.release(spent, "ModelUnavailable: down", delay=0.0)
    clock.advance(conn, 3600)  # far past any lease, backoff and give-up clock
    before = _row(conn, "p1")
    claims = conn.execute("SELECT count(*) AS n FROM run_claims WHERE run_id = 'p1'").fetchone()

    settings = Settings(database_url=database_url, max_attempts=5, give_up_after=60)
    supervisor = Supervisor(database_url, settings, agents=[support_once])
    try:
        assert supervisor.sweep() == []
    finally:
        supervisor.conn.close()

    assert journal.require_run("spent").status == "failed"  # the sweep did give up on that one
    assert _row(conn, "p1") == before
    after = conn.execute("SELECT count(*) AS n FROM run_claims WHERE run_id = 'p1'").fetchone()
    assert after == claims
    rows = db.run(
        conn,
        "claim_expired",
        {"owner": "s:1:z", "lease": LEASE, "limit": 10, "max_attempts": 5, "agents": None},
    )
    assert rows == []


def test_resolve_with_a_result_shown_to_the_model_as_any_json(conn: Any, database_url: str) -> None:
    _parked(Journal(conn), "p1")
    result = ["delivered", 1]
    out = cli(database_url, "resolve", "p1", "--seq", "1", "--confirm", json.dumps(result))
    assert out.code == 0, out.stderr
    assert "seq 1 (key p1:1) confirmed with the result you gave" in out.stdout
    assert _call(conn, "p1", 1)["result"] == result
    shown: Out = cli(database_url, "show", "p1")
    assert shown.code == 0, shown.stderr  # a result that is not an object shows too
    assert 'by an operator  confirmed  result ["delivered", 1]' in shown.stdout
