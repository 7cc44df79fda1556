"""The check that a ``read`` tool's retries journal no send.

**read_sends** (teardown, in-process runner): no call of a ``read`` tool has ``sends`` past
1, its intent's (a call the runtime refused is a read never sent: 0): a read acts on
nothing, so the runtime journals none of its retries as sent (``record_send``, for the
calls in doubt of the other contracts; schema.sql, ``tool_calls.sends``). Without it
acting's ``tool.effect is not "read"`` before ``record_send`` passed the suite twice over:
nothing read the count, and the suite's tools had their contracts as literals, the very
objects the runtime compares with (the desk's are ``agents.configured`` now). Seed-43
sample, docs/mutation-report-2026-12-04-seed43.md.
"""

from __future__ import annotations

from agent_runtime.store import db

from . import sqlfile
from .violations import Violation


def read_sends(conn: db.Connection) -> list[Violation]:
    """**read_sends**: see the module's doc."""
    return [
        Violation(
            "read_sends",
            row["run_id"],
            row["seq"],
            f"a read call journaled {row['sends']} sends: a read's retries are not sends",
        )
        for row in sqlfile.rows(conn, "read_calls_sent")
    ]
