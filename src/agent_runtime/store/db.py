"""Connections and the schema: the one boundary where database errors become ours."""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg.conninfo import conninfo_to_dict
from psycopg.rows import dict_row

from agent_runtime.errors import DatabaseError
from agent_runtime.store import migrate, pooling
from agent_runtime.store.queries import query

log = logging.getLogger(__name__)

CONNECT_TIMEOUT = 5  # seconds to reach the server before giving up

Row = dict[str, Any]
Connection = psycopg.Connection[Row]


def describe(url: str) -> str:
    """The URL without its password, for messages."""
    try:
        info = conninfo_to_dict(url)
    except psycopg.ProgrammingError:
        return "<unparseable database URL>"
    host = info.get("host") or "localhost"
    return f"{host}:{info.get('port') or 5432}/{info.get('dbname') or ''}"


def connect(url: str, *, application_name: str = "agent_runtime") -> Connection:
    """One autocommit connection with server-side prepared statements from the first use,
    or none behind a pooler (:mod:`agent_runtime.store.pooling`)."""
    try:
        conn = psycopg.connect(
            url,
            autocommit=True,
            row_factory=dict_row,
            prepare_threshold=0,
            connect_timeout=CONNECT_TIMEOUT,
            application_name=application_name,
        )
    except psycopg.OperationalError as exc:
        # psycopg puts the cause first ("... failed: Connection refused") and a hint on the
        # next line ("Is the server running ..."): keep both, on one line.
        reason = "; ".join(ln.strip() for ln in str(exc).splitlines() if ln.strip())
        reason = reason or type(exc).__name__
        raise DatabaseError(f"cannot reach the database at {describe(url)}: {reason}") from exc
    except psycopg.ProgrammingError as exc:
        raise DatabaseError(f"invalid database URL: {exc}") from exc
    try:
        pooling.adapt(conn, describe(url))  # behind PgBouncer: prepare nothing
    except psycopg.OperationalError as exc:
        conn.close()
        raise DatabaseError(f"database connection failed at its first query: {exc}") from exc
    return conn


def ensure_schema(conn: Connection) -> None:
    """Create the schema, or migrate an older one to this version, unless it is current;
    safe from many processes at once; a newer one is refused (see :mod:`.migrate`)."""
    migrate.migrate(conn)


def has_schema(conn: Connection) -> bool:
    """The schema is there, at this version (an older one counts as missing)."""
    state = migrate.read_state(conn)
    return state.kind == "versioned" and state.version == migrate.known().latest


def schema_missing(conn: Connection) -> bool:
    """No crashresume table at all: a database nothing has run against yet (an older
    schema is not missing: :func:`require_schema` says how to bring it up to date)."""
    return migrate.read_state(conn).kind == "empty"


def require_schema(conn: Connection) -> None:
    """Refuse a database without this version's schema; never change it (operator reads)."""
    schema = migrate.known()
    state = migrate.read_state(conn)
    migrate.refuse_newer(conn, state, schema)
    if state.kind == "empty":
        raise DatabaseError(
            f"the database {describe_conn(conn)} has no crashresume schema; run any worker once "
            "(it creates it), or: python -m agent_runtime schema"
        )
    if state.version < schema.latest:
        raise DatabaseError(
            f"the database {describe_conn(conn)} has an older crashresume schema (version "
            f"{state.version}, not {schema.latest}); run any worker once (it migrates it in "
            "place), or: python -m agent_runtime schema"
        )


def describe_conn(conn: Connection) -> str:
    info = conn.info
    return f"{info.host}:{info.port}/{info.dbname}"


def run(
    conn: Connection,
    name: str,
    params: Mapping[str, Any] | None = None,
    *,
    prepare: bool | None = None,
) -> list[Row]:
    """Execute a named query and return its rows (empty for statements without any).

    ``prepare=False`` for a statement run once per connection (no server-side plan kept).
    """
    try:
        cur = conn.execute(query(name), params or {}, prepare=prepare)
    except psycopg.OperationalError as exc:
        raise DatabaseError(f"database connection failed during {name}: {exc}") from exc
    return cur.fetchall() if cur.description is not None else []


def one(
    conn: Connection,
    name: str,
    params: Mapping[str, Any] | None = None,
    *,
    prepare: bool | None = None,
) -> Row | None:
    rows = run(conn, name, params, prepare=prepare)
    return rows[0] if rows else None


@contextmanager
def connection(url: str, *, application_name: str = "agent_runtime") -> Iterator[Connection]:
    conn = connect(url, application_name=application_name)
    try:
        yield conn
    finally:
        conn.close()
