"""One SQLite file of a mock: its connection, its lock, and IMMEDIATE transactions.

The cloud and the support desk keep their state this way: WAL, a busy timeout,
the durability level asked for (`FULL` by default), and the schema of their own
`.sql` file run on open, so a new instance on the same file is a restarted mock
that forgets nothing. Callers hold `_lock` around every use of `_db`.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import TracebackType
from typing import Final, Literal, Self, get_args

from mock_remotes._sql import queries
from mock_remotes.errors import MockError

__all__ = ["SqliteStore", "Synchronous"]

Synchronous = Literal["FULL", "NORMAL", "OFF"]
# PRAGMAs take no parameters: each setting is its own fixed statement in sqlite.sql.
_SYNCHRONOUS: Final[dict[Synchronous, str]] = {
    "FULL": "synchronous_full",
    "NORMAL": "synchronous_normal",
    "OFF": "synchronous_off",
}


class SqliteStore:
    """A mock's SQLite file, opened with its schema; safe to share between threads."""

    def __init__(
        self, path: str | os.PathLike[str], queries_file: str, synchronous: Synchronous
    ) -> None:
        """Open (or create) `path` and run the `schema` script of `sql/<queries_file>`.

        `synchronous`: FULL survives a power cut; NORMAL and OFF still survive a
        crash of the mock process and are faster where fsync is slow.
        """
        if synchronous not in get_args(Synchronous):
            raise ValueError(f"synchronous must be one of {get_args(Synchronous)}")
        self.path = os.fspath(path)
        self._sql = {**queries("sqlite.sql"), **queries(queries_file)}
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        self._db.row_factory = sqlite3.Row
        self._db.execute(self._sql["journal_wal"])
        self._db.execute(self._sql[_SYNCHRONOUS[synchronous]])
        self._db.execute(self._sql["busy_timeout"])
        self._db.executescript(self._sql["schema"])

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- plumbing (callers hold the lock) ------------------------------------------------

    @contextmanager
    def _transaction(self) -> Iterator[None]:
        self._db.execute("BEGIN IMMEDIATE")
        try:
            yield
        except MockError:
            self._db.execute("COMMIT")  # a refusal keeps what it recorded (counts, fences)
            raise
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")

    def _run(self, name: str, **params: object) -> None:
        self._db.execute(self._sql[name], params)

    def _one(self, name: str, **params: object) -> sqlite3.Row | None:
        row: sqlite3.Row | None = self._db.execute(self._sql[name], params).fetchone()
        return row

    def _all(self, name: str, **params: object) -> list[sqlite3.Row]:
        return self._db.execute(self._sql[name], params).fetchall()
