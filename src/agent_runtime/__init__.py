"""agent_runtime: a durable agent loop on PostgreSQL.

Each step asks a model what to do, journals the decision, writes an intent,
calls the tool under the idempotency key ``<run>:<seq>`` and confirms the
answer. A restart reads the journal back, re-sends stranded intents under their
keys and replays decisions instead of asking the model again. See
ARCHITECTURE.md for the tables, the crash points and how a stolen run settles.
"""

from __future__ import annotations

from .config import Settings
from .crash import CRASH_POINTS, CrashPlan, InjectedCrash
from .errors import AgentRuntimeError
from .journal import Journal
from .records import Decision, Lease, Run, ToolCall
from .supervisor import Supervisor
from .worker import Outcome, Worker

__all__ = [
    "CRASH_POINTS",
    "AgentRuntimeError",
    "CrashPlan",
    "Decision",
    "InjectedCrash",
    "Journal",
    "Lease",
    "Outcome",
    "Run",
    "Settings",
    "Supervisor",
    "ToolCall",
    "Worker",
]
