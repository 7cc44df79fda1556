"""Runs a supervisor will not take because their agent is not one of its own.

A supervisor claims only the runs of the agents it was started with (``--agent``). A run of
any other agent waits for a supervisor or a ``run`` that has it, and if none ever comes, it
waits forever. A supervisor cannot know whether another one serves that agent (nothing
records which supervisors run, nor their agents), so it says what it knows: once per run,
when the run has waited :data:`UNSERVED_AFTER` polls since it became claimable (a
supervisor that serves the agent claims within a poll when it has room),

    unserved run=r7 agent=support status=pending waited=12.0s serves=provisioning

at WARNING. It looks at most once a poll, at most :data:`LIMIT` runs, the longest waiting
first; a run that stops waiting (claimed, cancelled) and waits again is named again.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence

from agent_runtime.store import db

log = logging.getLogger(__name__)

UNSERVED_AFTER = 2  # polls a claimable run of another agent waits before it is named
LIMIT = 100  # runs named per look at most; the rest on a later look


class UnservedWatch:
    """Names each waiting run of an agent this supervisor does not have, once."""

    def __init__(self, agents: Sequence[str], poll: float) -> None:
        self.agents = sorted(agents)
        self.poll = poll  # seconds between two looks
        self.named: set[str] = set()  # runs named and still waiting at the last look
        self._next = 0.0  # time.monotonic() of the next look

    def maybe_look(self, conn: db.Connection) -> list[str]:
        """:meth:`look`, if a poll has passed since the last one."""
        now = time.monotonic()
        if now < self._next:
            return []
        self._next = now + self.poll
        return self.look(conn)

    def look(self, conn: db.Connection) -> list[str]:
        """Log every waiting run of another agent not named yet; the ids it named."""
        params = {"agents": self.agents, "after": UNSERVED_AFTER * self.poll, "limit": LIMIT}
        rows = db.run(conn, "unserved_runs", params)
        waiting = {row["id"] for row in rows}
        fresh = [row for row in rows if row["id"] not in self.named]
        for row in fresh:
            log.warning(
                "unserved run=%s agent=%s status=%s waited=%.1fs serves=%s",
                row["id"],
                row["agent"],
                row["status"],
                row["waited"],
                ",".join(self.agents),
            )
        # Forget the runs that stopped waiting, unless the look was cut at its limit.
        self.named = self.named | waiting if len(rows) >= LIMIT else waiting
        return [row["id"] for row in fresh]
