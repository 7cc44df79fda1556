"""The suite's named queries (``properties/sql/*.sql``), run like the runtime runs its own."""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

from agent_runtime import db
from agent_runtime.errors import DatabaseError
from agent_runtime.queries import _split

FOLDER = Path(__file__).resolve().parent / "sql"


@cache
def _queries() -> dict[str, str]:
    found: dict[str, str] = {}
    for path in sorted(FOLDER.glob("*.sql")):
        for name, text in _split(path.read_text("utf-8")).items():
            if name in found:
                raise ValueError(f"query {name!r} is defined twice (again in {path.name})")
            found[name] = text
    return found


def query(name: str) -> sql.SQL:
    try:
        return sql.SQL(_queries()[name])
    except KeyError:
        raise KeyError(f"no query named {name!r} in properties/sql/*.sql") from None


def rows(conn: db.Connection, name: str, params: Mapping[str, Any] | None = None) -> list[db.Row]:
    try:
        cur = conn.execute(query(name), params or {})
    except psycopg.OperationalError as exc:
        raise DatabaseError(f"database connection failed during {name}: {exc}") from exc
    return cur.fetchall() if cur.description is not None else []


def one(conn: db.Connection, name: str, params: Mapping[str, Any] | None = None) -> db.Row | None:
    found = rows(conn, name, params)
    return found[0] if found else None
