"""What the server did: transactions, WAL records, bytes and syncs, and the raw commit.

PostgreSQL 15 keeps these in ``pg_stat_wal`` (``wal_records``, ``wal_fpi``, ``wal_bytes``,
``wal_write``, ``wal_sync``: cluster-wide) and ``pg_stat_database`` (``xact_commit``,
``xact_rollback``: per database). A backend publishes its own counts at most once a
second unless told to (``pg_stat_force_next_flush()``), so :meth:`Meter.read` first has
every connection it is given run that, then reads the counters from another database of
the same server, where the reading itself counts no transaction (and writes no WAL).

``wal_sync`` counts ``fdatasync``/``fsync`` calls on WAL; with ``wal_sync_method`` set to
``open_datasync`` or ``open_sync`` it stays 0 and every ``wal_write`` is a synced write.
The insert position (``pg_current_wal_insert_lsn``) is the cross-check of ``wal_bytes``
(its difference also counts page headers).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, fields

from _setup import QUERIES, other_database
from agent_runtime.store import db


@dataclass(frozen=True, kw_only=True)
class Counters:
    xacts: float  # transactions committed or rolled back in the measured database
    records: float  # WAL records
    fpi: float  # of which full-page images (the first change of a page after a checkpoint)
    wal_bytes: float
    lsn_bytes: float  # the insert position's advance: wal_bytes plus page headers
    writes: float  # WAL writes (wal_write)
    syncs: float  # WAL fsyncs (wal_sync)

    def __sub__(self, other: Counters) -> Counters:
        return Counters(**{f.name: getattr(self, f.name) - getattr(other, f.name) for f in _F})

    def per(self, n: float) -> Counters:
        return Counters(**{f.name: getattr(self, f.name) / n for f in _F})

    @staticmethod
    def mean(many: Sequence[Counters]) -> Counters:
        return Counters(**{f.name: sum(getattr(c, f.name) for c in many) / len(many) for f in _F})

    def line(self) -> str:
        return (
            f"{self.xacts:5.2f} transactions, {self.syncs:5.2f} WAL fsyncs "
            f"({self.writes:.2f} writes), {self.records:6.2f} WAL records "
            f"({self.fpi:.2f} full-page), {self.wal_bytes:7.0f} WAL bytes "
            f"({self.lsn_bytes:.0f} by LSN)"
        )


_F = fields(Counters)


class Meter:
    """Reads the counters of the database behind ``url`` from another database."""

    def __init__(self, url: str, dbname: str) -> None:
        self.conn = db.connect(other_database(url), application_name="bench.meter")
        self.dbname = dbname

    def close(self) -> None:
        self.conn.close()

    def read(self, flush: Sequence[db.Connection] = ()) -> Counters:
        """The counters now, after ``flush``'s connections published their own."""
        for conn in flush:
            conn.execute(QUERIES["force_flush"])
        row = self.conn.execute(QUERIES["wal_counters"], {"dbname": self.dbname}).fetchone()
        assert row is not None
        return Counters(
            xacts=float(row["xacts"] or 0),
            records=float(row["wal_records"]),
            fpi=float(row["wal_fpi"]),
            wal_bytes=float(row["wal_bytes"]),
            lsn_bytes=float(row["lsn_bytes"]),
            writes=float(row["wal_write"]),
            syncs=float(row["wal_sync"]),
        )


class RawCommit:
    """One raw durable single-row commit: an INSERT of one row into a table with a primary
    key, autocommit, prepared, on a connection of its own (synchronous_commit on)."""

    def __init__(self, url: str) -> None:
        self.conn = db.connect(url, application_name="bench.raw")
        self.conn.execute(QUERIES["raw_table"])
        self.conn.execute(QUERIES["raw_truncate"])

    def close(self) -> None:
        self.conn.execute(QUERIES["raw_drop"])
        self.conn.close()

    def block(self, commits: int) -> float:
        """Seconds per commit, over ``commits`` commits in a row."""
        insert = QUERIES["raw_commit"]
        start = time.perf_counter()
        for _ in range(commits):
            self.conn.execute(insert, {"v": "x"})
        return (time.perf_counter() - start) / commits

    def counted(self, meter: Meter, commits: int) -> Counters:
        """What one raw commit costs the server (mean of ``commits``)."""
        before = meter.read([self.conn])
        self.block(commits)
        after = meter.read([self.conn])
        extra = meter.read([self.conn]) - after  # the flush's own statement, to take out
        return (after - before - extra).per(commits)
