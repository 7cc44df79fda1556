"""``activity``: a run's last activity keeps up with its decisions.

``record_decision`` moves ``runs.updated_at`` (the order of the operator's list, the
sweep's longest-idle-first claim, the stuck watchdog's measure) only when it is a minute
old or more -- a throttle that keeps a run's steps HOT updates. Whatever the throttle
skips, ``updated_at`` is never a minute or more older than the run's latest model answer
(every other write sets it to ``cr_now()``). Judged after an event that journaled a
decision.
"""

from __future__ import annotations

from agent_runtime.store import db

from . import sqlfile
from .violations import Violation


def activity_truth(conn: db.Connection) -> list[Violation]:
    return [
        Violation(
            "activity",
            row["id"],
            None,
            f"last activity {row['updated_at']} is a minute or more before its latest model "
            f"answer at {row['answered_at']}: a decision refreshes a stale updated_at",
        )
        for row in sqlfile.rows(conn, "stale_activity")
    ]
