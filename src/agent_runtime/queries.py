"""Named SQL queries, loaded once from the ``sql/*.sql`` files.

A query starts at a ``-- name: <name>`` line and runs to the next one. Nothing
here builds SQL from strings: callers pass parameters, never identifiers.
"""

from __future__ import annotations

import re
from functools import cache
from importlib import resources

from psycopg import sql

_NAME = re.compile(r"^-- name: (\w+)\s*$", re.MULTILINE)


def _split(text: str) -> dict[str, str]:
    parts = _NAME.split(text)
    queries: dict[str, str] = {}
    for name, body in zip(parts[1::2], parts[2::2], strict=True):
        lines = [ln for ln in body.strip().splitlines() if not ln.lstrip().startswith("--")]
        queries[name] = "\n".join(lines).strip().rstrip(";")
    return queries


@cache
def _all() -> dict[str, str]:
    """Every named query of every ``sql/*.sql`` file but the schema; names are unique."""
    queries: dict[str, str] = {}
    folder = resources.files("agent_runtime").joinpath("sql")
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if entry.name.endswith(".sql") and entry.name != "schema.sql":
            for name, text in _split(entry.read_text("utf-8")).items():
                if name in queries:
                    raise ValueError(f"query {name!r} is defined twice (again in {entry.name})")
                queries[name] = text
    return queries


def query(name: str) -> sql.SQL:
    try:
        return sql.SQL(_all()[name])
    except KeyError:
        raise KeyError(f"no query named {name!r} in agent_runtime/sql/*.sql") from None


def schema_text() -> str:
    return resources.files("agent_runtime").joinpath("sql/schema.sql").read_text("utf-8")
