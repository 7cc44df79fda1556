"""The suite's named queries (``properties/sql/*.sql``), run like the runtime runs its own."""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

from agent_runtime.errors import DatabaseError
from agent_runtime.store import db
from agent_runtime.store.queries import NamedQueries, load_queries

FOLDER = Path(__file__).resolve().parent / "sql"


@cache
def _queries() -> NamedQueries:
    return load_queries(FOLDER)


def query(name: str) -> sql.SQL:
    """A statement of ``properties/sql/*.sql``, or a variant's edit of a runtime one."""
    from .variants.mutations import EDITS, statement

    if name in EDITS:
        return statement(name)
    return _queries()[name]


def rows(conn: db.Connection, name: str, params: Mapping[str, Any] | None = None) -> list[db.Row]:
    try:
        cur = conn.execute(query(name), params or {})
    except psycopg.OperationalError as exc:
        raise DatabaseError(f"database connection failed during {name}: {exc}") from exc
    return cur.fetchall() if cur.description is not None else []


def one(conn: db.Connection, name: str, params: Mapping[str, Any] | None = None) -> db.Row | None:
    found = rows(conn, name, params)
    return found[0] if found else None
