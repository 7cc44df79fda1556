"""Every SQL statement lives in a ``.sql`` file, loaded by name; none is assembled in Python."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from psycopg import sql

from agent_runtime.store.queries import load_queries, query, runtime_queries

ROOT = Path(__file__).resolve().parent.parent
# Where no execute() may take SQL built in Python (f-string, .format, %, +).
BUILT_NOWHERE = ("src", "mock/mock_remotes", "tests", "properties", "bench")
# Where every statement comes from a .sql file: an execute() takes a loaded query.
FROM_FILES = ("src/agent_runtime", "mock/mock_remotes")
TRANSACTION_CONTROL = {"BEGIN IMMEDIATE", "COMMIT", "ROLLBACK"}  # the driver's protocol


def _executes(folders: tuple[str, ...]) -> list[tuple[str, int, ast.expr]]:
    """(file, line, first argument) of every ``.execute``/``.executescript`` call."""
    found = []
    for folder in folders:
        for path in sorted((ROOT / folder).rglob("*.py")):
            tree = ast.parse(path.read_text("utf-8"))
            for node in ast.walk(tree):
                if (
                    isinstance(node, ast.Call)
                    and isinstance(node.func, ast.Attribute)
                    and node.func.attr in ("execute", "executescript", "executemany")
                    and node.args
                ):
                    found.append((str(path.relative_to(ROOT)), node.lineno, node.args[0]))
    return found


def _built(arg: ast.expr) -> bool:
    if isinstance(arg, ast.JoinedStr):
        return True
    if isinstance(arg, ast.BinOp) and isinstance(arg.op, ast.Mod | ast.Add):
        return any(isinstance(side, ast.Constant | ast.JoinedStr) for side in (arg.left, arg.right))
    return (
        isinstance(arg, ast.Call)
        and isinstance(arg.func, ast.Attribute)
        and arg.func.attr == "format"
        and isinstance(arg.func.value, ast.Constant)
    )


def test_no_statement_is_assembled_from_python_strings() -> None:
    built = [f"{f}:{line}" for f, line, arg in _executes(BUILT_NOWHERE) if _built(arg)]
    assert built == []


def test_the_runtime_and_the_mocks_execute_only_statements_from_sql_files() -> None:
    inline = [
        f"{f}:{line}: {arg.value!r}"
        for f, line, arg in _executes(FROM_FILES)
        if isinstance(arg, ast.Constant) and arg.value not in TRANSACTION_CONTROL
    ]
    assert inline == []


def test_the_guard_sees_an_f_string_and_a_literal() -> None:
    f_string, literal = ast.parse('c.execute(f"DROP {x}")\nc.execute("SELECT 1")').body
    assert isinstance(f_string, ast.Expr) and isinstance(f_string.value, ast.Call)
    assert _built(f_string.value.args[0])
    assert isinstance(literal, ast.Expr) and isinstance(literal.value, ast.Call)
    assert not _built(literal.value.args[0])


def test_every_runtime_query_is_named_once_and_the_schema_is_not_among_them() -> None:
    queries = runtime_queries()
    assert {"claim_run", "clock_advance", "schema_state", "operator_list_runs"} <= set(queries)
    assert isinstance(query("clock_now"), sql.SQL)
    assert all("CREATE TABLE" not in queries.text(name) for name in queries)
    with pytest.raises(KeyError, match=r"no query named 'nope' in .*agent_runtime/sql/"):
        query("nope")


def test_another_folder_loads_with_the_same_loader(tmp_path: Path) -> None:
    (tmp_path / "a.sql").write_text(
        "-- header\n\n-- name: first\n-- a comment line, dropped\nSELECT 1;\n"
        "-- name: second\nSELECT %(x)s\n",
        "utf-8",
    )
    (tmp_path / "skipped.sql").write_text("CREATE TABLE t (v int);\n", "utf-8")
    (tmp_path / "notes.txt").write_text("-- name: ignored\nSELECT 3\n", "utf-8")

    queries = load_queries(tmp_path, skip=("skipped.sql",))

    assert dict((name, queries.text(name)) for name in queries) == {
        "first": "SELECT 1",
        "second": "SELECT %(x)s",
    }
    with pytest.raises(KeyError, match=re.escape(f"no query named 'third' in {tmp_path}")):
        queries["third"]


def test_a_name_defined_in_two_files_is_refused_naming_both(tmp_path: Path) -> None:
    (tmp_path / "a.sql").write_text("-- name: same\nSELECT 1\n", "utf-8")
    (tmp_path / "b.sql").write_text("-- name: same\nSELECT 2\n", "utf-8")
    with pytest.raises(ValueError, match=r"'same' is defined twice \(a.sql and b.sql\)"):
        load_queries(tmp_path)
