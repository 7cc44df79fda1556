"""DBOS's system database, one per scenario: a SQLite file, or a PostgreSQL database.

A fresh system database costs DBOS its migrations at launch (some 30 statements, each its
own transaction: ~0.2 s on SQLite, 1-2 s on a PostgreSQL server that fsyncs), so every
scenario would pay them at its first start. Both kinds are therefore made from a template
that DBOS migrated once: the SQLite file is copied, the PostgreSQL database is created with
``CREATE DATABASE ... TEMPLATE``; DBOS then finds its schema current and launches at its
usual cost. A lock (``flock`` on a file, an advisory lock on the server) lets only one
start make the template, so process mode with ``workers=N`` is safe.

``PostgresDatabases`` names each database ``<prefix>_<token>_<run id>`` (cut to PostgreSQL's
63 bytes with a hash), the token random per instance so a run never sees another's
leftovers; it drops a scenario's database when its last start completes, and every one it
made (the template too) in ``close()``.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import re
import secrets
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

Migrate = Callable[[str], None]  # launches DBOS once on a system database URL, then drops it

IDENTIFIER_BYTES = 63  # PostgreSQL's longest identifier
TEMPLATE = "template"  # the template's name after the prefix and token
SQLITE_TEMPLATE = ".crashresume-dbos-template.sqlite"  # in the SQLite directory


class SqliteDatabases:
    """``<directory>/<run_id>.sqlite`` per scenario, kept after the run."""

    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory)

    def url(self, run_id: str, migrate: Migrate) -> str:
        database = self.directory / f"{run_id}.sqlite"
        if not database.exists():
            template = self.directory / SQLITE_TEMPLATE
            with _file_lock(self.directory / f"{SQLITE_TEMPLATE}.lock"):
                if not template.exists():
                    making = template.with_suffix(f".{os.getpid()}")
                    migrate(f"sqlite:///{making}")
                    os.replace(making, template)
            copy = database.with_suffix(f".{os.getpid()}")
            shutil.copyfile(template, copy)
            os.replace(copy, database)
        return f"sqlite:///{database}"

    def finished(self, run_id: str) -> None:
        """SQLite files stay: they are small, and worth reading after a failed run."""

    def close(self) -> None:
        """Nothing to drop."""


@contextlib.contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


class PostgresDatabases:
    """A database per scenario on the server of ``server_url``, dropped after use."""

    def __init__(self, server_url: str, *, prefix: str = "crashresume") -> None:
        import psycopg.conninfo

        self.server_url = server_url
        self.info = {k: str(v) for k, v in psycopg.conninfo.conninfo_to_dict(server_url).items()}
        slug = _slug(prefix)
        self.base = f"{slug}_{secrets.token_hex(4)}_"
        self.template = self.base + TEMPLATE
        self._ready: set[str] = set()  # made or found by this process: no server round trip

    def name(self, run_id: str) -> str:
        """The database of ``run_id``."""
        name = self.base + _slug(run_id)
        if len(name.encode()) <= IDENTIFIER_BYTES:
            return name
        digest = hashlib.sha1(run_id.encode()).hexdigest()[:8]
        return f"{name[: IDENTIFIER_BYTES - len(digest) - 1]}_{digest}"

    def url(self, run_id: str, migrate: Migrate) -> str:
        """The URL of ``run_id``'s database, made from the template if it does not exist."""
        name = self.name(run_id)
        if name in self._ready:  # a restart of a scenario this process started before
            return self.database_url(name)
        with self._server() as server:
            server.execute("SELECT pg_advisory_lock(hashtext(%s))", [self.base])
            try:
                if not _exists(server, name):
                    if not _exists(server, self.template):
                        server.execute(_create(self.template))
                        migrate(self.database_url(self.template))
                    server.execute(_create(name, self.template))
            finally:
                server.execute("SELECT pg_advisory_unlock(hashtext(%s))", [self.base])
        self._ready.add(name)
        return self.database_url(name)

    def database_url(self, name: str) -> str:
        """``server_url`` with database ``name``, as the SQLAlchemy URL DBOS takes."""
        import sqlalchemy

        info = self.info
        named = {"user", "password", "host", "port", "dbname"}
        return sqlalchemy.engine.URL.create(
            "postgresql",
            username=info.get("user"),
            password=info.get("password"),
            host=info.get("host"),
            port=int(info["port"]) if "port" in info else None,
            database=name,
            query={key: value for key, value in info.items() if key not in named},
        ).render_as_string(hide_password=False)

    def finished(self, run_id: str) -> None:
        """The scenario's last start completed: drop its database."""
        name = self.name(run_id)
        self._ready.discard(name)
        with self._server() as server:
            server.execute(_drop(name))

    def close(self) -> None:
        """Drop every database this instance made, the template last."""
        self._ready.clear()
        with self._server() as server:
            rows = server.execute(
                "SELECT datname FROM pg_database WHERE starts_with(datname, %s)", [self.base]
            ).fetchall()
            for (name,) in sorted(rows, key=lambda row: row[0] == self.template):
                server.execute(_drop(name))

    @contextlib.contextmanager
    def _server(self) -> Iterator[Any]:
        import psycopg

        with psycopg.connect(self.server_url, autocommit=True) as server:
            yield server


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_") or "x"


def _exists(server: Any, name: str) -> bool:
    found = server.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone()
    return found is not None


def _create(name: str, template: str | None = None) -> Any:
    from psycopg import sql

    if template is None:
        return sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name))
    return sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(
        sql.Identifier(name), sql.Identifier(template)
    )


def _drop(name: str) -> Any:
    from psycopg import sql

    return sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
