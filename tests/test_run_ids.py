"""Run ids are checked at every edge, any other text works end to end, and nothing printed
can break a line or reach a terminal as a control sequence.

Real processes (the CLI, a supervisor, the mocks under uvicorn) and a real PostgreSQL.
"""

from __future__ import annotations

import logging
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from wcwidth import wcswidth

from agent_runtime.config import Settings
from agent_runtime.errors import EXIT_CRASHED, EXIT_USAGE, InvalidRunId
from agent_runtime.logfmt import LineFormatter, escape
from agent_runtime.loop.worker import Worker
from agent_runtime.store.journal import Journal
from agent_runtime.store.runid import MAX_LENGTH, check_run_id, run_id_problem
from mock_remotes import Cloud, Model, cloud_transport, model_transport

from .fix_runtime import Agent, cloud_key, journal_rows
from .fix_supervisor import SupervisorProcess
from .operator_cli import cli

UNICODE = "rün-日本-🚀"
BAD = {
    "empty": "",
    "blank": "   ",
    "leading space": " demo",
    "trailing space": "demo ",
    "newline": "de\nmo",
    "tab": "de\tmo",
    "escape": "de\x1b[31mmo",
    "delete": "de\x7fmo",
    "c1": "de\x9bmo",
    "line separator": "de\u2028mo",
    "bidi override": "de\u202emo",
    "not utf-8": "de\udcffmo",
    "too long": "x" * (MAX_LENGTH + 1),
}
GOOD = [UNICODE, "demo", "a b", "run:1/2%3", "x" * MAX_LENGTH, "é" * MAX_LENGTH]


@pytest.mark.parametrize("run_id", list(BAD.values()), ids=list(BAD))
def test_a_run_id_is_refused_for_what_makes_it_unsafe(run_id: str) -> None:
    assert run_id_problem(run_id) is not None
    with pytest.raises(InvalidRunId) as info:
        check_run_id(run_id, source="--run-id")
    message = str(info.value)
    assert message.startswith("--run-id '") and "is refused: it " in message
    assert escape(message) == message  # the refusal itself prints safely
    assert len(message) < 400  # a 10,000-character id is not quoted back whole


@pytest.mark.parametrize("run_id", GOOD)
def test_any_other_text_is_a_run_id(run_id: str) -> None:
    assert check_run_id(run_id) == run_id


def test_escape_writes_every_unprintable_character_as_a_backslash_escape() -> None:
    text = "a\nb\tc\x1b[2J\x7f\x9b\u2028\u202e\udcff 🚀 rün"
    assert escape(text) == "a\\nb\\tc\\x1b[2J\\x7f\\x9b\\u2028\\u202e\\udcff 🚀 rün"
    assert escape("plain text, ünïcödé") == "plain text, ünïcödé"


# -- every edge refuses with exit 2 before anything is written --------------------------------


def _nothing_written(conn: Any, mock_servers: Any) -> None:
    assert conn.execute("SELECT count(*) AS n FROM runs").fetchone()["n"] == 0
    assert mock_servers.call_counts()["total"] == 0


def _one_error(text: str) -> str:
    errors = [ln for ln in text.splitlines() if ln.startswith("ERROR")]
    assert len(errors) == 1, text
    assert "Traceback" not in text and "\x1b" not in text
    return errors[0]


@pytest.mark.parametrize(
    "name", ["empty", "blank", "newline", "tab", "escape", "not utf-8", "too long"]
)
def test_the_cli_refuses_a_bad_run_id_flag_and_writes_nothing(
    name: str, agent: Agent, conn: Any, mock_servers: Any
) -> None:
    result = agent.run("unused", "run", "--run-id", BAD[name])
    assert result.code == EXIT_USAGE, result.out
    assert "InvalidRunId" in _one_error(result.out) and "--run-id '" in result.out
    _nothing_written(conn, mock_servers)


@pytest.mark.parametrize("name", ["blank", "leading space", "escape", "too long"])
def test_the_cli_refuses_a_bad_run_id_variable_and_writes_nothing(
    name: str, agent: Agent, conn: Any, mock_servers: Any
) -> None:
    result = agent.run(BAD[name])  # the fixture puts it in RUN_ID
    assert result.code == EXIT_USAGE, result.out
    assert "RUN_ID '" in _one_error(result.out)
    _nothing_written(conn, mock_servers)


def test_the_library_refuses_a_bad_run_id_before_writing(conn: Any, tmp_path: Path) -> None:
    with Cloud(tmp_path / "cloud.sqlite3") as cloud:
        model = Model()
        worker = Worker.build(
            Journal(conn),
            Settings(),
            model_transport=model_transport(model),
            cloud_transport=cloud_transport(cloud),
        )
        for run_id in (BAD["newline"], BAD["empty"]):
            with pytest.raises(InvalidRunId, match=r"run id '.*' is refused"):
                worker.run(run_id)
            with pytest.raises(InvalidRunId):
                worker.resolve(run_id)
        worker.close_clients()
        assert model.call_counts()["total"] == 0
    assert conn.execute("SELECT count(*) AS n FROM runs").fetchone()["n"] == 0


@pytest.mark.parametrize("command", ["show", "resolve", "cancel", "retry"])
@pytest.mark.parametrize("name", ["newline", "escape", "too long"])
def test_the_operator_commands_refuse_a_bad_run_id(
    command: str, name: str, conn: Any, database_url: str
) -> None:
    Journal(conn).create_run(BAD[name])  # as an older version, or plain SQL, might have
    before = conn.execute("SELECT * FROM runs").fetchall()
    out = cli(database_url, command, BAD[name])
    assert out.code == EXIT_USAGE, out.stderr
    assert "InvalidRunId" in _one_error(out.stderr) and out.stdout == ""
    assert conn.execute("SELECT * FROM runs").fetchall() == before


def test_the_supervisor_fails_a_stored_run_whose_id_no_worker_would_take(
    agent: Agent, conn: Any, mock_servers: Any
) -> None:
    journal = Journal(conn)
    journal.create_run(BAD["newline"])  # written before ids were checked
    journal.create_run(BAD["escape"])
    journal.create_run("fine")
    sup = SupervisorProcess(agent.env("unused"), "--poll", "0.1", "--once")
    assert sup.wait() == 0, sup.text

    assert "\x1b" not in sup.text  # the id is in the log, its escape sequence is not
    refused = [ln for ln in sup.lines if ln.startswith("WARNING refused run=de\\n")]
    assert refused == [
        "WARNING refused run=de\\nmo reason=\"InvalidRunId: run id 'de\\\\nmo' is refused: it "
        "holds a control character (U+000A) at position 2; a run id is 1 to 200 characters, "
        'not blank, with no whitespace at either end and no control characters"'
    ]
    rows = {r["id"]: r for r in conn.execute("SELECT id, status, failure FROM runs")}
    assert rows[BAD["newline"]]["status"] == rows[BAD["escape"]]["status"] == "failed"
    assert rows[BAD["newline"]]["failure"].startswith("InvalidRunId: run id 'de\\nmo' is refused")
    assert rows["fine"]["status"] == "done"
    assert [run for run, _ in sup.resumed()] == ["fine"]
    assert set(mock_servers.call_counts()["by_run"]) == {"fine"}  # no worker asked for them


# -- a run id in any script, end to end -------------------------------------------------------


def test_a_non_ascii_run_id_crashes_resolves_and_finishes_like_any_other(
    agent: Agent, conn: Any, database_url: str, mock_servers: Any, tmp_path: Path
) -> None:
    crashed = agent.run(UNICODE, CRASH_AT="after_call", CRASH_SEQ="0")
    assert crashed.code == EXIT_CRASHED, crashed.out  # the injected crash, nothing else
    assert "Traceback" not in crashed.out and "UnicodeEncodeError" not in crashed.out
    key = f"{UNICODE}:0"
    assert cloud_key(mock_servers, key)["requests"] == 1  # the cloud keeps the key as it is

    shown = cli(database_url, "show", UNICODE)
    assert shown.code == 0, shown.stderr
    assert f"key {key}" in shown.stdout and "confirm   none: IN DOUBT" in shown.stdout
    remotes = {"CLOUD_URL": mock_servers.cloud_url, "MODEL_URL": mock_servers.model_url}
    resolved = cli(database_url, "resolve", UNICODE, **remotes)
    assert resolved.code == 0, resolved.stderr
    assert f"key {key}" in resolved.stdout and "remote already_done" in resolved.stdout
    assert cloud_key(mock_servers, key)["requests"] == 2  # the same key, sent again

    finished = agent.run(UNICODE)
    assert finished.code == 0, finished.out
    resources = mock_servers.resources(UNICODE)
    assert resources["counts"] == {"servers": 1, "databases": 1, "dns_records": 1}
    assert sorted(r["key"] for r in resources["resources"]) == [f"{UNICODE}:{i}" for i in range(3)]
    assert [c["idem_key"] for c in journal_rows(conn, UNICODE)["calls"]] == [
        f"{UNICODE}:{i}" for i in range(3)
    ]

    table = cli(database_url, "runs").stdout.splitlines()
    row = next(ln for ln in table if ln.startswith(UNICODE))
    assert row.split()[1] == "done"
    picture = tmp_path / "unicode.svg"
    assert cli(database_url, "show", UNICODE, "--svg", str(picture)).code == 0
    assert ET.parse(picture).getroot().get("data-run") == UNICODE


def test_wide_characters_keep_the_runs_table_aligned(conn: Any, database_url: str) -> None:
    journal = Journal(conn)
    for run_id in (UNICODE, "plain"):
        journal.create_run(run_id)
    header, *rows = cli(database_url, "runs").stdout.splitlines()[:3]
    column = wcswidth(header[: header.index("STATUS")])
    # 日, 本 and 🚀 take two terminal columns each: the table counts columns, not characters
    assert [wcswidth(row[: row.index("pending")]) for row in rows] == [column, column]


# -- whatever a value holds, the output stays one line per thing, and inert --------------------

NASTY = "evil\x1b[2J\x1b]0;pwned\x07\nsecond line\r\x9b31m"


def test_a_reason_with_control_characters_neither_breaks_the_table_nor_reaches_the_terminal(
    conn: Any, database_url: str, tmp_path: Path
) -> None:
    journal = Journal(conn)
    for run_id in ("a-run", "b-run"):
        journal.create_run(run_id)
        assert cli(database_url, "cancel", run_id, "--reason", NASTY).code == 0

    table = cli(database_url, "runs")
    assert table.code == 0, table.stderr
    lines = table.stdout.splitlines()
    assert len(lines) == 4 and lines[-1] == "2 runs"  # header, two runs, the count
    assert all("\x1b" not in ln and "\r" not in ln and "\x9b" not in ln for ln in lines)
    assert lines[1].endswith("cancelled by operator: " + escape(NASTY))

    shown = cli(database_url, "show", "a-run")
    assert "\x1b" not in shown.stdout and "\r" not in shown.stdout and "\x9b" not in shown.stdout
    assert f"failure  cancelled by operator: {escape(NASTY)}" in shown.stdout.splitlines()
    data = cli(database_url, "show", "a-run", "--json").json()  # JSON keeps the value itself
    assert data["run"]["failure"] == "cancelled by operator: " + NASTY
    picture = tmp_path / "nasty.svg"
    assert cli(database_url, "show", "a-run", "--svg", str(picture)).code == 0
    texts = [t.text or "" for t in ET.parse(picture).getroot().iter()]  # well-formed XML
    assert any(escape(NASTY) in t for t in texts)


def test_the_log_formatter_escapes_what_a_value_brings_in() -> None:
    record = logging.LogRecord("x", logging.ERROR, __file__, 1, "stopped run=%s reason=%s",
                               ("r", NASTY), None)  # fmt: skip
    line = LineFormatter().format(record)
    assert line == f"ERROR stopped run=r reason={escape(NASTY)}"
    assert "\x1b" not in line and "\n" not in line and "\x9b" not in line


def test_an_escaped_cell_still_lines_up_with_its_column(conn: Any, database_url: str) -> None:
    journal = Journal(conn)
    for run_id, owner in (("odd", "host\x1b[2J:1:x"), ("even", "plain-host:2:y")):
        journal.create_run(run_id)
        assert journal.claim(run_id, owner, 12.0) is not None  # tokens of another version

    rows = cli(database_url, "runs").stdout.splitlines()[1:3]

    assert all("\x1b" not in row for row in rows)
    assert len({wcswidth(row[: row.index("expires")]) for row in rows}) == 1, rows
