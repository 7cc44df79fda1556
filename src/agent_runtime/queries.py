"""Named SQL queries, loaded once from ``sql/queries.sql``.

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
    text = resources.files("agent_runtime").joinpath("sql/queries.sql").read_text("utf-8")
    return _split(text)


def query(name: str) -> sql.SQL:
    try:
        return sql.SQL(_all()[name])
    except KeyError:
        raise KeyError(f"no query named {name!r} in sql/queries.sql") from None


def schema_text() -> str:
    return resources.files("agent_runtime").joinpath("sql/schema.sql").read_text("utf-8")
