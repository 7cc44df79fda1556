"""Whether a connection reaches PostgreSQL through a pooler, and what the runtime does then.

A worker's connection prepares every statement on the server the first time it runs it
(DESIGN section 3: no per-step parsing). That is session state: behind PgBouncer in
transaction mode consecutive transactions of one client may run on different server
connections, and a statement prepared on one is missing on the next ("prepared statement
... does not exist"). Everything else the runtime sends is per transaction already:
``set_config(..., true)`` for the confirm's commit level, ``pg_advisory_xact_lock`` for
the schema, isolation levels given with each ``BEGIN``; no ``SET``, no session lock, no
``LISTEN``, no temporary table.

So a connection learns once, when it opens, whether a pooler sits in between: the server
sends its process id with the cancel key at startup, and a direct connection (or a plain
TCP proxy, which passes the key through) finds the same id in ``pg_backend_pid()``. A
pooler answers the startup itself with a key of its own, so the two differ. Behind a
pooler the connection prepares nothing (one parse per statement, measured in
ARCHITECTURE "Behind PgBouncer"). A pooler in statement mode cannot run a transaction at
all, and every step's write is one: that connection is refused with a clear error.
"""

from __future__ import annotations

import logging
from typing import Any, Final

import psycopg

from agent_runtime.errors import ConfigError
from agent_runtime.store.queries import query

Connection = psycopg.Connection[dict[str, Any]]  # db.Connection, which imports this module

log = logging.getLogger(__name__)

STATEMENT_MODE_HINT: Final = (
    "a pooler between the runtime and PostgreSQL refuses transactions (PgBouncer's "
    "pool_mode = statement?): every step's write is a transaction; use pool_mode = "
    "transaction or session, or connect to PostgreSQL directly"
)
_told = False  # the pooler is logged once per process, not once per connection


def pooled(conn: Connection) -> bool:
    """True when the server process answering is not the one that sent the startup key."""
    row = conn.execute(query("serving_backend"), prepare=False).fetchone()
    return row is not None and row["pid"] != conn.info.backend_pid


def adapt(conn: Connection, where: str) -> bool:
    """Make ``conn`` safe behind a pooler (prepare nothing), or refuse a pooler that cannot
    run a transaction. Returns whether a pooler was found."""
    global _told
    if not pooled(conn):
        return False
    conn.prepare_threshold = None
    try:
        with conn.transaction():
            conn.execute(query("pooling_probe"), prepare=False)
    except psycopg.Error as exc:
        conn.close()
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ConfigError(f"{where}: {STATEMENT_MODE_HINT} (the server said: {first})") from exc
    if not _told:
        log.info("pooler-detected db=%s prepared_statements=off", where)
        _told = True
    return True
