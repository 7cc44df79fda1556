"""Every operator command's errors: one line each, and a non-zero exit code.

An unknown run is exit 2; a database without the schema, or one that cannot be reached,
is exit 4 (try again later) and left untouched (an operator view never creates the
schema), except that ``runs`` there says there are no runs yet.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from psycopg import sql
from psycopg.conninfo import make_conninfo

from agent_runtime.errors import EXIT_RETRY_LATER, EXIT_USAGE
from agent_runtime.store import db

from .operator_cli import cli, one_error_line

# -- errors: one line each, non-zero ---------------------------------------------------------


COMMANDS = [("runs",), ("show", "nope"), ("resolve", "nope"), ("cancel", "nope")]


@pytest.mark.parametrize("command", COMMANDS[1:], ids=lambda c: c[0])
def test_an_unknown_run_is_one_line_and_exit_2(
    command: tuple[str, ...], conn: Any, database_url: str
) -> None:
    out = cli(database_url, *command)
    assert out.code == EXIT_USAGE
    assert "no run with id 'nope'" in one_error_line(out, "RunNotFound")


@pytest.fixture
def empty_database(conn: Any, database_url: str) -> Iterator[str]:
    name = f"cr_op_empty_{uuid.uuid4().hex[:8]}"
    conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        yield make_conninfo(database_url, dbname=name)
    finally:
        conn.execute(sql.SQL("DROP DATABASE {}").format(sql.Identifier(name)))


@pytest.mark.parametrize("command", COMMANDS[1:], ids=lambda c: c[0])
def test_a_database_without_the_schema_is_one_line_and_left_untouched(
    command: tuple[str, ...], empty_database: str
) -> None:
    out = cli(empty_database, *command)
    assert out.code == EXIT_RETRY_LATER
    assert "no crashresume schema" in one_error_line(out, "DatabaseError")
    with db.connection(empty_database) as c:
        assert not db.has_schema(c)  # an operator view never creates it behind your back


def test_runs_on_a_database_without_the_schema_says_there_are_no_runs_yet(
    empty_database: str,
) -> None:
    out = cli(empty_database, "runs")
    assert (out.code, out.stderr) == (0, ""), out.stderr
    assert out.stdout.startswith("no runs yet: the database ")
    assert "has no crashresume schema (nothing has run against it;" in out.stdout
    as_json = cli(empty_database, "runs", "--json")
    assert as_json.code == 0, as_json.stderr
    assert as_json.json() == {"now": None, "next": None, "runs": []}
    with db.connection(empty_database) as c:
        assert not db.has_schema(c)  # still not created behind the operator's back


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c[0])
def test_an_unreachable_database_is_one_line(command: tuple[str, ...]) -> None:
    # nothing listens on port 1
    out = cli("postgresql://postgres@127.0.0.1:1/none", *command)
    assert out.code == EXIT_RETRY_LATER
    assert "cannot reach the database at 127.0.0.1:1/none" in one_error_line(out, "DatabaseError")
