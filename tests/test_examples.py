"""The example support agent (``examples/support``), run as docs/01-your-agent.md says,
and its tools.

The two commands run for real (the mocks under uvicorn, agent processes killed with
``os._exit``), and what they did is read back from the journal: one ticket, one delivery,
the final answer. The in-process tests put the desk's faults under the example's tools.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from agent_runtime import Outcome, Settings, Worker
from agent_runtime.store import clock, db
from agent_runtime.store.journal import Journal
from examples.support import support_agent
from mock_remotes import FaultTransport, Model, Support, model_transport, support_transport

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "examples" / "support" / "__init__.py"
TASK = "Order A-1001 arrived broken: the mug's handle came off in the box."
# Variables a developer's shell may hold that would change what the example does.
FOREIGN = ("CRASH_AT", "CRASH_SEQ", "RUN_ID", "MODEL_PROTOCOL", "MODEL_NAME", "MODEL_URL")


def _example(database_url: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in FOREIGN}
    env["DATABASE_URL"] = database_url
    return subprocess.run(
        [sys.executable, "-m", "examples.support", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )


def _steps(conn: db.Connection, run_id: str) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = conn.execute(
        "SELECT d.seq, d.tool, c.idem_key, c.state, c.effect, c.result, c.remote_status,"
        " c.generation, c.confirm_generation"
        " FROM decisions d LEFT JOIN tool_calls c USING (run_id, seq)"
        " WHERE d.run_id = %s ORDER BY d.seq",
        (run_id,),
    ).fetchall()
    return rows


def test_the_support_example_files_one_ticket_sends_one_email_and_answers(
    database_url: str, conn: db.Connection
) -> None:
    result = _example(database_url)
    out = result.stdout + result.stderr
    assert result.returncode == 0, out
    run_id = re.search(r"^run +(support-\w+): 3 tool calls, 4 model answers$", result.stdout, re.M)
    assert run_id, out
    run = Journal(conn).require_run(run_id[1])
    answer = "Filed ticket T-0000001 for order A-1001 and emailed ada@example.test (#4)."
    assert (run.status, run.agent, run.input, run.output) == ("done", "support", TASK, answer)
    steps = _steps(conn, run.id)
    assert [(s["tool"], s["effect"], s["remote_status"]) for s in steps] == [
        ("lookup_order", "read", "read"),
        ("file_ticket", "keyed", "created"),
        ("send_email", "checked", "created"),
        ("done", None, None),
    ]
    assert steps[1]["result"]["id"] == "T-0000001"
    assert steps[2]["result"]["message_id"] == f"{run.id}:2"
    # What the desk itself holds for the run, as the example printed it: one of each.
    assert re.findall(r"^ticket +(\S+) under key (\S+):", result.stdout, re.M) == [
        ("T-0000001", f"{run.id}:1")
    ]
    assert re.findall(r"^email +(\S+) to (\S+):", result.stdout, re.M) == [
        (steps[2]["result"]["id"], "ada@example.test")
    ]
    assert f"answer   {answer}" in result.stdout
    assert "Traceback" not in out


def test_the_support_demo_resends_the_ticket_under_its_key_and_checks_the_email(
    database_url: str, conn: db.Connection
) -> None:
    result = _example(database_url, "demo")
    out = result.stdout + result.stderr
    assert result.returncode == 0, out
    assert "NOT AS PROMISED" not in out
    ticket_run, email_run = re.findall(
        r"^  python -m agent_runtime show (\S+)$", result.stdout, re.M
    )
    journal = Journal(conn)

    # The ticket: the first process died after its intent, before the desk heard of it.
    assert "!!! CRASH_AT=after_intent seq=1 -- os._exit(1)" in out
    assert f"before the restart the desk's GET /v1/tickets?run={ticket_run} lists 0" in out
    key = f"{ticket_run}:1"
    assert f"resending run={ticket_run} seq=1 key={key} effect=keyed" in out
    assert f"what the desk answered about {key}: created" in out  # one request, one ticket
    ticket = _steps(conn, ticket_run)[1]
    assert (ticket["idem_key"], ticket["state"], ticket["remote_status"]) == (
        key,
        "confirmed",
        "created",
    )
    assert (ticket["generation"], ticket["confirm_generation"]) == (1, 2)
    run = journal.require_run(ticket_run)
    assert run.status == "done" and run.llm_calls == 4
    filed = ticket["result"]["id"]
    assert run.output == f"Filed ticket {filed} for order A-1001 and emailed ada@example.test (#4)."

    # The email: the desk delivered it, the first process died before the confirm.
    assert "!!! CRASH_AT=after_call seq=2 -- os._exit(1)" in out
    key = f"{email_run}:2"
    assert f"before the restart the desk's GET /v1/messages?message_id={key} lists 1" in out
    assert f"checking run={email_run} seq=2 key={key} effect=checked" in out
    assert f"checked run={email_run} seq=2 key={key} effect=checked found=yes" in out
    assert f"resending run={email_run}" not in out  # it only checked: nothing was sent again
    assert f"what the desk answered about {key}: delivered, present" in out  # no second send
    email = _steps(conn, email_run)[2]
    assert (email["state"], email["effect"], email["remote_status"]) == (
        "confirmed",
        "checked",
        "found",
    )
    assert (email["generation"], email["confirm_generation"]) == (1, 2)
    assert email["result"]["message_id"] == key
    run = journal.require_run(email_run)
    assert run.status == "done" and run.llm_calls == 4
    assert run.output is not None and run.output.startswith("Filed ticket T-")
    assert "Traceback" not in out


def test_the_agent_page_shows_the_example_agent_exactly() -> None:
    page = (REPO / "docs" / "01-your-agent.md").read_text(encoding="utf-8")
    blocks = re.findall(r"^```python\n(.*?)^```$", page, re.M | re.S)
    assert blocks, "docs/01-your-agent.md has no python block"
    assert blocks[0] == EXAMPLE.read_text(encoding="utf-8")


# -- the example's tools under the desk's faults, in-process --------------------------------


@pytest.fixture
def desk(tmp_path: Path) -> Iterator[Support]:
    with Support(tmp_path / "desk.sqlite3") as fresh:
        yield fresh


def _run(conn: db.Connection, desk: httpx.BaseTransport, run_id: str, task: str) -> Outcome:
    """The example agent, run to the end in this process against an in-process desk. The
    database clock is frozen and every wait of the worker moves it instead of sleeping (a
    checked send's wait for its first attempt to land, a retry's backoff)."""
    clock.freeze(conn)

    def wait(seconds: float) -> None:
        if seconds > 0:
            clock.advance(conn, seconds)

    worker = Worker.build(
        Journal(conn),
        Settings(model_url="http://model/v1"),
        agents=support_agent("http://support"),
        transports={"model": model_transport(Model()), "support": desk},
        sleep=wait,
    )
    try:
        return worker.run(run_id, input=task)
    finally:
        worker.close_clients()  # the connection is the test's
        clock.thaw(conn)


def _answers(desk: Support, ref: str) -> list[str]:
    return [a.answer for a in desk.answers(ref=ref)]


def test_a_lost_answer_to_the_email_is_checked_before_anything_is_sent_again(
    conn: db.Connection, desk: Support
) -> None:
    transport = FaultTransport(support_transport(desk))
    transport.inject("read_timeout", path="/v1/messages")  # the desk delivers, the answer is lost
    outcome = _run(conn, transport, "lost-mail", TASK)
    assert outcome.output is not None and outcome.output.startswith("Filed ticket T-0000001")
    assert len(desk.deliveries(message_id="lost-mail:2")) == 1
    assert _answers(desk, "lost-mail:2") == ["delivered", "present"]
    assert _steps(conn, "lost-mail")[2]["remote_status"] == "found"


def test_a_desk_error_on_the_ticket_is_retried_under_the_same_key(
    conn: db.Connection, desk: Support
) -> None:
    desk.set_faults(fail_before=1)  # 500 before acting: the tool raises DeskBusy
    outcome = _run(conn, support_transport(desk), "busy-desk", TASK)
    assert outcome.status == "done"
    assert [t.key for t in desk.tickets(run="busy-desk")] == ["busy-desk:1"]
    assert _answers(desk, "busy-desk:1") == ["injected_failure", "created"]


def test_an_unknown_order_is_an_answer_the_model_hears_and_nothing_is_filed(
    conn: db.Connection, desk: Support
) -> None:
    outcome = _run(conn, support_transport(desk), "no-order", "Where is my order Z-9999?")
    assert outcome.output == "I could not find order Z-9999 (#2)."
    assert _steps(conn, "no-order")[0]["result"]["error"] == "unknown_order"
    assert desk.tickets() == [] and desk.deliveries() == []


def test_the_examples_help_keeps_its_lines_and_names_both_commands() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "examples.support", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert "  python -m examples.support demo     # two real crashes and restarts, checked" in lines
    assert "``" not in done.stdout and "::" not in done.stdout  # no reST run together
