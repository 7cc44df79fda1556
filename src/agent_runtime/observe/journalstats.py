"""The counts that live in the journal, read at scrape time: runs by status, parked runs,
calls in doubt.

They are read, not counted: a counter kept beside the journal would drift from it (a
crash between a write and its count, an operator's change, another supervisor's), while
one statement at scrape time (``metrics_journal``, ``sql/observe.sql``) makes every scrape
agree with the journal exactly. Each scrape opens its own short connection: the collector
runs in the endpoint's thread, and a connection kept open would be inherited by every
worker the supervisor forks. For the same reason a fork waits for a scrape's read (and
its log line) to end: a pool worker forked while this thread held a lock (the stderr
buffer's, libpq's) would inherit it held forever and hang at its first use.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING

from agent_runtime.errors import AgentRuntimeError
from agent_runtime.store import db

if TYPE_CHECKING:
    from prometheus_client.metrics_core import Metric

log = logging.getLogger(__name__)

# Every value the schema allows (sql/schema.sql, runs.status and tool_calls.effect): each is
# exported, 0 when the journal has none, so a series never vanishes between scrapes.
STATUSES = ("pending", "running", "done", "failed", "cancelled", "needs_attention")
EFFECTS = ("keyed", "checked", "read", "once")
APPLICATION = "agent_runtime.metrics"

# Held by a scrape while it reads the journal; every fork of this process waits for it.
READING = threading.Lock()
os.register_at_fork(
    before=READING.acquire, after_in_parent=READING.release, after_in_child=READING.release
)


def journal_counts(conn: db.Connection) -> dict[str, dict[str, int]]:
    """``{"runs": {status: n}, "in_doubt": {effect: n}}``, every status and effect present."""
    counts: dict[str, dict[str, int]] = {
        "runs": dict.fromkeys(STATUSES, 0),
        "in_doubt": dict.fromkeys(EFFECTS, 0),
    }
    for row in db.run(conn, "metrics_journal", prepare=False):
        counts[row["kind"]][row["label"]] = int(row["n"])
    return counts


class JournalCollector:
    """A prometheus_client collector of :func:`journal_counts`, read at every scrape."""

    def __init__(self, url: str) -> None:
        self.url = url

    def describe(self) -> list[Metric]:
        return []  # read from the database at scrape time: nothing to check at registration

    def collect(self) -> Iterator[Metric]:
        from prometheus_client.core import GaugeMetricFamily

        up = GaugeMetricFamily(
            "agent_runtime_journal_up", "1 if the last scrape read the journal, else 0"
        )
        with READING:  # a fork waits: see the module's docstring
            try:
                with db.connection(self.url, application_name=APPLICATION) as conn:
                    counts = journal_counts(conn)
            except AgentRuntimeError as exc:
                log.warning("metrics-journal-unreadable error=%r", str(exc))
                counts = None
        if counts is None:
            up.add_metric([], 0)
            yield up
            return
        up.add_metric([], 1)
        yield up
        runs = GaugeMetricFamily(
            "agent_runtime_runs", "runs in the journal by status", labels=["status"]
        )
        for status, n in counts["runs"].items():
            runs.add_metric([status], n)
        yield runs
        yield GaugeMetricFamily(
            "agent_runtime_runs_parked",
            "runs waiting for an operator (status needs_attention: a call in doubt)",
            value=counts["runs"]["needs_attention"],
        )
        doubt = GaugeMetricFamily(
            "agent_runtime_calls_in_doubt",
            "tool calls with an intent and no confirm, by effect contract",
            labels=["effect"],
        )
        for effect, n in counts["in_doubt"].items():
            doubt.add_metric([effect], n)
        yield doubt
