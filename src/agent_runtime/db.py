"""Connections and the schema: the one boundary where database errors become ours."""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg.conninfo import conninfo_to_dict
from psycopg.rows import dict_row

from .errors import DatabaseError
from .queries import query, schema_text

log = logging.getLogger(__name__)

CONNECT_TIMEOUT = 5  # seconds to reach the server before giving up
SCHEMA_LOCK = 7_300_105  # advisory lock key serialising schema creation
SCHEMA_VERSION = "crashresume schema 10"  # the comment schema.sql puts on the runs table

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
    """One autocommit connection with server-side prepared statements from the first use."""
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
    return conn


def _schema_state(conn: Connection) -> tuple[bool, bool]:
    """(present, up to date): the tables exist; and so does the newest part of schema.sql."""
    row = one(conn, "schema_present", {"version": SCHEMA_VERSION}, prepare=False)
    return (bool(row and row["present"]), bool(row and row["up_to_date"]))


def has_schema(conn: Connection) -> bool:
    """The whole of this version's schema is there (an older one counts as missing)."""
    return all(_schema_state(conn))


def schema_missing(conn: Connection) -> bool:
    """No crashresume table at all: a database nothing has run against yet (an older
    schema is not missing: :func:`require_schema` says how to bring it up to date)."""
    return not _schema_state(conn)[0]


def ensure_schema(conn: Connection) -> None:
    """Create the tables, or bring an older schema up to date, unless it is current; safe
    to call from many processes at once (schema.sql is idempotent)."""
    if not has_schema(conn):
        apply_schema(conn)


def apply_schema(conn: Connection) -> None:
    """Run schema.sql under an advisory lock: concurrent appliers take turns."""
    with conn.transaction():
        run(conn, "schema_lock", {"key": SCHEMA_LOCK}, prepare=False)
        conn.execute(schema_text(), prepare=False)
    log.info("schema-applied db=%s", describe_conn(conn))


def require_schema(conn: Connection) -> None:
    """Refuse a database without this version's schema; never change it (operator reads)."""
    present, up_to_date = _schema_state(conn)
    if not present:
        raise DatabaseError(
            f"the database {describe_conn(conn)} has no crashresume schema; run any worker once "
            "(it applies schema.sql), or: psql <url> -f schema.sql"
        )
    if not up_to_date:
        raise DatabaseError(
            f"the database {describe_conn(conn)} has an older crashresume schema (not "
            f"{SCHEMA_VERSION!r}); run any worker once (it upgrades it in place), or: "
            "python -m agent_runtime schema"
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
