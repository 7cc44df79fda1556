"""A worker that raises an exception the runtime does not know logs the traceback (one inert
line), records the reason on the run and exits 70; the run stays resumable.

The bug comes from ``tests/hooks/sitecustomize.py``, loaded into real processes (a
supervisor and its forked workers, a CLI run) through ``PYTHONPATH``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from agent_runtime.errors import EXIT_SOFTWARE
from agent_runtime.store import clock
from agent_runtime.store.journal import Journal

from .fix_runtime import Agent
from .operator_cli import cli

HOOKS = str(Path(__file__).with_name("hooks"))
FAST = ("--poll", "0.1", "--lease", "12", "--heartbeat", "3")


def _buggy(bug: str) -> dict[str, str]:
    path = os.pathsep.join(p for p in (HOOKS, os.environ.get("PYTHONPATH")) if p)
    return {"PYTHONPATH": path, "CRASHRESUME_TEST_BUG": bug, "RUN_BACKOFF": "30"}


def _run(conn: Any, run_id: str) -> dict[str, Any]:
    row = conn.execute(
        "SELECT status, owner, failure, lease_expires_at > cr_now() AS waiting"
        " FROM runs WHERE id = %s",
        (run_id,),
    ).fetchone()
    assert row is not None
    return dict(row)


def _errors(text: str) -> list[str]:
    return [ln for ln in text.splitlines() if ln.startswith("ERROR")]


@pytest.mark.usefixtures("frozen_clock")
def test_a_supervised_worker_that_raises_says_why_records_it_and_the_run_goes_on(
    agent: Agent, conn: Any, database_url: str, mock_servers: Any, supervisors: Any
) -> None:
    Journal(conn).create_run("buggy")
    sup = supervisors(*FAST, "--once", **_buggy("decide"))
    assert sup.wait() == 0, sup.text

    assert sup.exits("buggy") == [("buggy", EXIT_SOFTWARE)]
    (line,) = _errors(sup.text)  # one line says what happened, traceback included
    assert line.startswith(
        "ERROR stopped run=buggy resumable=yes reason='UnexpectedError: RuntimeError: decide: "
        "a bug on purpose \\x1b[31m(tests/hooks)'"
    )
    assert "\\nTraceback (most recent call last):\\n" in line and "in _broken" in line
    assert "\x1b" not in sup.text  # the message's escape sequence is printed inert
    assert "backoff run=buggy attempt=1 until=" in sup.text
    run = _run(conn, "buggy")
    assert run["failure"].startswith("UnexpectedError: RuntimeError: decide: a bug on purpose")
    assert run["status"] == "running" and run["owner"] is None and run["waiting"]
    shown = cli(database_url, "show", "buggy")
    assert "failure  UnexpectedError: RuntimeError: decide: a bug on purpose \\x1b[31m" in (
        shown.stdout
    )

    clock.advance(conn, 30)  # the bug is fixed (no hook): the run goes on from where it was
    fixed = supervisors(*FAST, "--once")
    assert fixed.wait() == 0, fixed.text
    assert _run(conn, "buggy")["status"] == "done"
    assert mock_servers.resources("buggy")["total"] == 3


@pytest.mark.usefixtures("frozen_clock")
def test_a_supervised_worker_that_raises_before_holding_its_run_is_recorded_by_the_supervisor(
    agent: Agent, conn: Any, supervisors: Any
) -> None:
    Journal(conn).create_run("stillborn")
    sup = supervisors(*FAST, "--once", **_buggy("open"))
    assert sup.wait() == 0, sup.text

    assert sup.exits("stillborn") == [("stillborn", EXIT_SOFTWARE)]
    (line,) = _errors(sup.text)
    assert line.startswith("ERROR unexpected run=stillborn error='RuntimeError: open: a bug")
    assert "\\nTraceback (most recent call last):\\n" in line
    assert "backoff run=stillborn attempt=1 until=" in sup.text
    run = _run(conn, "stillborn")
    assert run["failure"] == "the worker exited with code 70 (see its log)"
    assert run["owner"] is None and run["waiting"]  # freed, after a backoff: it may recur


def test_the_cli_prints_an_unexpected_error_as_one_line_and_exits_70(
    agent: Agent, conn: Any
) -> None:
    result = agent.run("cli-bug", **_buggy("decide"))
    assert result.code == EXIT_SOFTWARE, result.out
    (line,) = _errors(result.out)
    assert line.startswith("ERROR stopped run=cli-bug resumable=yes reason='UnexpectedError: ")
    assert "\\nTraceback (most recent call last):\\n" in line
    assert "\x1b" not in result.out
    assert _run(conn, "cli-bug")["failure"].startswith("UnexpectedError: RuntimeError: decide")


def test_the_cli_prints_a_bug_before_any_run_is_held_as_one_line_and_exits_70(
    agent: Agent, conn: Any
) -> None:
    result = agent.run("cli-open", **_buggy("open"))
    assert result.code == EXIT_SOFTWARE, result.out
    assert result.out.strip().splitlines() == _errors(result.out)  # one line, nothing raw
    (line,) = _errors(result.out)
    assert line.startswith("ERROR unexpected error='RuntimeError: open: a bug on purpose ")
    assert "\\nTraceback (most recent call last):\\n" in line and "\x1b" not in result.out
