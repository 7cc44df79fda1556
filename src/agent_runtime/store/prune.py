"""Retention: remove final runs, with everything journaled for them, once they are old.

A journal only grows: every run keeps its steps, claims, retries and resolutions. ``python
-m agent_runtime prune --done-before 30d [--failed-before 90d] [--cancelled-before 7d]``
removes the runs in that final status whose last change (``runs.updated_at``: when they
became final) is older than the duration, and every row keyed by them (``prune_batch`` in
``sql/prune.sql``). A supervisor started with ``--prune-after DURATION`` (env
``PRUNE_AFTER``) does the same for all three statuses, at most once every
:data:`PRUNE_EVERY` seconds.

Removal goes in batches of :data:`BATCH` runs, each its own short transaction that locks
only the runs it removes (``FOR UPDATE SKIP LOCKED``), so nothing a worker or a claim waits
for is ever held: a worker's writes find their run by ``status = 'running'``, and a run
that is running, pending or needs attention is never a candidate. Each batch is one
line, ``pruned status=done runs=500 older_than=2592000s``, at INFO.

The command itself is :mod:`agent_runtime.operator.pruning`; a duration is read by
:func:`agent_runtime.duration.parse_duration` (``30d``, ``12h``, ``1h30m``); anything else
is a :class:`~agent_runtime.errors.ConfigError` (one line, exit 2).
"""

from __future__ import annotations

import itertools
import logging
import time
from collections.abc import Mapping

from agent_runtime.store import db

log = logging.getLogger(__name__)

APPLICATION = "agent_runtime.prune"  # application_name of its connection

BATCH = 500  # runs removed per transaction: a few ms of locks on those rows only
PRUNE_EVERY = 60.0  # seconds between two prunes of a supervisor with --prune-after
ROUND = 20  # batches per status a supervisor's prune removes at most (the rest: next round),
# so a first prune of a large journal never keeps it from its sweeps for long
FINAL = ("done", "failed", "cancelled")  # the statuses prune removes; never any other


def prune(
    conn: db.Connection,
    older_than: Mapping[str, float],
    *,
    batch: int = BATCH,
    max_batches: int | None = None,
) -> dict[str, int]:
    """Remove the runs of each final status in ``older_than`` whose last change is more
    than that many seconds old, batch by batch (at most ``max_batches`` per status; None:
    until none is left); how many of each were removed."""
    unknown = sorted(set(older_than) - set(FINAL))
    if unknown:
        raise ValueError(f"prune removes only final runs ({', '.join(FINAL)}), not {unknown}")
    removed = {}
    for status, age in older_than.items():
        removed[status] = 0
        for _ in itertools.count() if max_batches is None else range(max_batches):
            params = {"status": status, "age": age, "batch": batch}
            ids = db.run(conn, "prune_batch", params)  # autocommit: its own transaction
            removed[status] += len(ids)
            if ids:
                log.info("pruned status=%s runs=%d older_than=%.0fs", status, len(ids), age)
            if len(ids) < batch:
                break
    return removed


class PruneTimer:
    """A supervisor's periodic prune: every final run older than ``after`` seconds, at
    most once every ``every`` seconds (None: never)."""

    def __init__(self, after: float | None, every: float = PRUNE_EVERY) -> None:
        self.after = after
        self.every = every
        self._next = 0.0  # time.monotonic() of the next prune

    def maybe_prune(self, conn: db.Connection) -> dict[str, int]:
        if self.after is None or time.monotonic() < self._next:
            return {}
        self._next = time.monotonic() + self.every
        return prune(conn, dict.fromkeys(FINAL, self.after), max_batches=ROUND)
