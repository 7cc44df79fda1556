"""Schema versions: a new database gets ``schema.sql`` whole, an older one numbered steps.

A version is the number of a file in ``sql/migrations/`` (``0007_sweep_indexes.sql`` is
version 7); :func:`known` lists them, the last one is the version ``schema.sql`` is. What
:func:`migrate` finds, and does:

    empty        no crashresume table: runs schema.sql, which stamps its version
    legacy N     made by a schema.sql from before schema_version (N <= 9), recognised by
                 the comment it left on runs ('crashresume schema N'; none: 1): adopted at
                 N and brought to the last version in one transaction (no step can be
                 recorded before migration 0010 creates the table)
    versioned N  schema_version's highest row: each pending file runs in its own
                 transaction, with its row
    newer        N past the last known: :class:`SchemaTooNew`, nothing touched

Every change runs in a transaction that first takes one advisory transaction lock
(:data:`SCHEMA_LOCK`) and then reads the state again (from ``pg_class``, not the session's
catalog cache: see ``schema_state``): processes starting at once apply each step exactly
once. A current database costs two queries and no lock.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import cache
from importlib import resources
from importlib.resources.abc import Traversable
from typing import Any

import psycopg

from agent_runtime._version import version as package_version
from agent_runtime.errors import DatabaseError, SchemaTooNew
from agent_runtime.store.queries import query

log = logging.getLogger(__name__)

# agent_runtime.db builds on this module (its ensure_schema and require_schema), so this
# one talks to psycopg itself: a connection as db.connect makes it (autocommit, dict rows).
Connection = psycopg.Connection[dict[str, Any]]

SCHEMA_LOCK = 7_300_105  # advisory lock key serialising every schema change
SCHEMA_FILE = "schema.sql"  # the current schema, whole
MIGRATIONS = "migrations"  # the folder of numbered steps, beside schema.sql
_FILE = re.compile(r"(\d{4})_\w+\.sql")
_LEGACY = re.compile(r"crashresume schema (\d+)")


@dataclass(frozen=True, kw_only=True)
class Migration:
    """One numbered step: ``sql/migrations/<version>_<what>.sql``."""

    version: int
    name: str  # the file name
    text: str


@dataclass(frozen=True, kw_only=True)
class Schema:
    """What this code knows: the whole schema and the steps that lead to it."""

    whole: str  # schema.sql
    steps: tuple[Migration, ...]  # by version, 1 to latest without a gap

    @property
    def latest(self) -> int:
        return self.steps[-1].version

    def after(self, version: int) -> tuple[Migration, ...]:
        return tuple(m for m in self.steps if m.version > version)


@dataclass(frozen=True, kw_only=True)
class Applied:
    """One row of schema_version."""

    version: int
    how: str  # 'created' | 'adopted' | 'migrated'
    applied_at: datetime


@dataclass(frozen=True, kw_only=True)
class State:
    """A database's schema, as :func:`read_state` finds it."""

    kind: str  # 'empty' | 'legacy' | 'versioned'
    version: int  # 0 when empty
    applied: tuple[Applied, ...] = ()  # versioned only


def load(folder: Traversable) -> Schema:
    """``folder/schema.sql`` and ``folder/migrations/NNNN_*.sql``, numbered 1, 2, ... with no
    gap; a misnamed or missing step is a ``ValueError`` naming it."""
    steps: list[Migration] = []
    for entry in sorted(folder.joinpath(MIGRATIONS).iterdir(), key=lambda e: e.name):
        if not entry.name.endswith(".sql"):
            continue
        match = _FILE.fullmatch(entry.name)
        expected = len(steps) + 1
        if match is None or int(match.group(1)) != expected:
            raise ValueError(
                f"{folder}/{MIGRATIONS}/{entry.name}: expected {expected:04d}_<what>.sql "
                "(migrations are numbered from 0001, one step each, with no gap)"
            )
        steps.append(Migration(version=expected, name=entry.name, text=entry.read_text("utf-8")))
    if not steps:
        raise ValueError(f"{folder}/{MIGRATIONS} has no migration")
    return Schema(whole=folder.joinpath(SCHEMA_FILE).read_text("utf-8"), steps=tuple(steps))


@cache
def known() -> Schema:
    """The schema this package ships (``agent_runtime/sql``, in a wheel too)."""
    return load(resources.files("agent_runtime").joinpath("sql"))


def where(conn: Connection) -> str:
    """host:port/dbname, for messages."""
    info = conn.info
    return f"{info.host}:{info.port}/{info.dbname}"


def _rows(conn: Connection, name: str, params: dict[str, Any] | None = None) -> list[Any]:
    """A named query run once (no prepared plan kept); a lost connection is ours."""
    try:
        cur = conn.execute(query(name), params or {}, prepare=False)
    except psycopg.OperationalError as exc:
        raise DatabaseError(f"database connection failed during {name}: {exc}") from exc
    return cur.fetchall() if cur.description is not None else []


def read_state(conn: Connection) -> State:
    """What the database is; a ``runs`` table crashresume did not make is a DatabaseError."""
    found = _rows(conn, "schema_state")[0]
    if found["versioned"]:
        applied = tuple(Applied(**row) for row in _rows(conn, "schema_versions"))
        if not applied:
            raise DatabaseError(
                f"the database {where(conn)} has an empty schema_version table: "
                "restore it, or start from an empty database"
            )
        return State(kind="versioned", version=applied[-1].version, applied=applied)
    if not found["has_runs"]:
        return State(kind="empty", version=0)
    comment = found["runs_comment"]
    if comment is None:  # the first release set no comment
        return State(kind="legacy", version=1)
    match = _LEGACY.fullmatch(comment)
    if match is None:
        raise DatabaseError(
            f"the database {where(conn)} has a runs table that crashresume did not "
            f"make (its comment is {comment!r}): use another database"
        )
    return State(kind="legacy", version=int(match.group(1)))


def refuse_newer(conn: Connection, state: State, schema: Schema) -> None:
    if state.version > schema.latest:
        raise SchemaTooNew(
            f"the database {where(conn)} has schema version {state.version}, newer "
            f"than this crashresume ({package_version()}) knows: {schema.latest}; upgrade "
            "crashresume, or point DATABASE_URL at another database"
        )


def migrate(conn: Connection, schema: Schema | None = None) -> list[int]:
    """Bring the database to ``schema.latest``; the versions this call applied, in order.

    Safe from many processes at once; refuses a newer database (:class:`SchemaTooNew`).
    """
    schema = schema or known()
    state = read_state(conn)
    refuse_newer(conn, state, schema)
    done: list[int] = []
    while state.version < schema.latest:
        changes: list[tuple[str, int, str]] = []
        with conn.transaction():
            _rows(conn, "schema_lock", {"key": SCHEMA_LOCK})
            state = read_state(conn)  # again: another process may have moved it meanwhile
            refuse_newer(conn, state, schema)
            if state.version < schema.latest:
                changes = _step(conn, state, schema)
        for how, version, source in changes:  # committed
            log.info(
                "schema-applied db=%s how=%s version=%d file=%s", where(conn), how, version, source
            )
            done += [version] if how != "adopted" else []
        state = read_state(conn)
    return done


def _step(conn: Connection, state: State, schema: Schema) -> list[tuple[str, int, str]]:
    """One transaction's change (the caller holds the lock): (how, version, source file)
    of each version it recorded."""
    if state.kind == "empty":
        _run_file(conn, SCHEMA_FILE, schema.whole)
        stamped = read_state(conn).version
        if stamped != schema.latest:
            raise DatabaseError(
                f"schema.sql stamps version {stamped}, but the last migration is "
                f"{schema.latest}: update the INSERT INTO schema_version at its end"
            )
        return [("created", stamped, SCHEMA_FILE)]
    steps = schema.after(state.version)
    if state.kind == "versioned":
        steps = steps[:1]  # one step a transaction, recorded with it
    for step in steps:
        _run_file(conn, step.name, step.text)
    changes = [("migrated", step.version, step.name) for step in steps]
    if state.kind == "legacy":  # recorded once 0010 has made the table
        changes.insert(0, ("adopted", state.version, "runs-comment"))
    for how, version, _ in changes:
        _rows(conn, "schema_version_record", {"version": version, "how": how})
    return changes


def _run_file(conn: Connection, name: str, text: str) -> None:
    try:
        conn.execute(text, prepare=False)  # a script, several statements: no parameters
    except psycopg.Error as exc:
        raise DatabaseError(f"{name} failed on {where(conn)}: {exc}") from exc


@dataclass(frozen=True, kw_only=True)
class Status:
    """What ``python -m agent_runtime schema --status`` prints."""

    state: State
    latest: int
    pending: tuple[Migration, ...]


def status(conn: Connection, schema: Schema | None = None) -> Status:
    """The database's version, what was applied and what is pending; changes nothing."""
    schema = schema or known()
    state = read_state(conn)
    refuse_newer(conn, state, schema)
    pending = () if state.kind == "empty" else schema.after(state.version)
    return Status(state=state, latest=schema.latest, pending=pending)


def describe_status(found: Status, place: str) -> Sequence[str]:
    """The lines of ``schema --status``."""
    state = found.state
    if state.kind == "empty":
        return [
            f"database {place}: no crashresume schema; `python -m agent_runtime schema` "
            f"(or any worker) creates it whole at version {found.latest}"
        ]
    lines = [f"database {place}: schema version {state.version}, latest {found.latest}"]
    if state.kind == "legacy":
        lines.append(
            f"applied  {state.version:4d}  made by an older schema.sql (no schema_version "
            "table yet): adopted at this version on the next migration"
        )
    for row in state.applied:
        lines.append(
            f"applied  {row.version:4d}  {row.how:<8}  {row.applied_at:%Y-%m-%d %H:%M:%S%z}"
        )
    for step in found.pending:
        lines.append(f"pending  {step.version:4d}  {step.name}")
    return lines
