"""agent_runtime: a durable agent loop on PostgreSQL.

Each step asks a model what to do, journals the decision, writes an intent,
calls the tool under the idempotency key ``<run>:<seq>`` and confirms the
answer. A restart reads the journal back, re-sends stranded intents under their
keys and replays decisions instead of asking the model again. See
ARCHITECTURE.md for the tables, the crash points and how a stolen run settles.

The public surface is below. Names are loaded on first use (PEP 562): importing
the package loads no submodule, so ``python -m agent_runtime.supervisor`` runs a
module nothing imported before it.
"""

from __future__ import annotations

import importlib as _importlib
import typing as _typing

__all__ = [
    "CRASH_POINTS",
    "Agent",
    "AgentRuntimeError",
    "BackingOff",
    "Call",
    "CallInFlight",
    "ConfigError",
    "CrashPlan",
    "DatabaseError",
    "Decision",
    "History",
    "InjectedCrash",
    "InvalidArguments",
    "InvalidRunId",
    "Journal",
    "Lease",
    "LeaseLost",
    "MalformedAnswer",
    "ModelError",
    "ModelUnavailable",
    "NeedsAttention",
    "Outcome",
    "RemoteError",
    "RemoteRejected",
    "RemoteUnavailable",
    "Result",
    "Run",
    "RunNotFound",
    "RunTask",
    "RunUnavailable",
    "Settings",
    "StaleGeneration",
    "Supervisor",
    "TooManyBadAnswers",
    "Tool",
    "ToolCall",
    "UnexpectedError",
    "UnknownAgent",
    "UnknownTool",
    "UnusableDecision",
    "Wiring",
    "Worker",
    "WrongEndpoint",
    "load_agent",
    "tool",
    "url_from_env",
]

_HOME = {
    "CRASH_POINTS": "agent_runtime.crash",
    "Agent": "agent_runtime.tools.agent",
    "AgentRuntimeError": "agent_runtime.errors",
    "BackingOff": "agent_runtime.errors",
    "CallInFlight": "agent_runtime.errors",
    "Call": "agent_runtime.tools.tooldef",
    "ConfigError": "agent_runtime.errors",
    "CrashPlan": "agent_runtime.crash",
    "DatabaseError": "agent_runtime.errors",
    "Decision": "agent_runtime.store.records",
    "History": "agent_runtime.store.records",
    "InjectedCrash": "agent_runtime.crash",
    "InvalidArguments": "agent_runtime.errors",
    "InvalidRunId": "agent_runtime.errors",
    "Journal": "agent_runtime.store.journal",
    "Lease": "agent_runtime.store.records",
    "LeaseLost": "agent_runtime.errors",
    "MalformedAnswer": "agent_runtime.errors",
    "ModelError": "agent_runtime.errors",
    "ModelUnavailable": "agent_runtime.errors",
    "NeedsAttention": "agent_runtime.errors",
    "Outcome": "agent_runtime.loop.outcome",
    "RemoteError": "agent_runtime.errors",
    "RemoteRejected": "agent_runtime.errors",
    "RemoteUnavailable": "agent_runtime.errors",
    "Result": "agent_runtime.tools.tooldef",
    "Run": "agent_runtime.store.records",
    "RunNotFound": "agent_runtime.errors",
    "RunTask": "agent_runtime.store.records",
    "RunUnavailable": "agent_runtime.errors",
    "Settings": "agent_runtime.config",
    "StaleGeneration": "agent_runtime.errors",
    "Supervisor": "agent_runtime.supervisor.supervision",
    "Tool": "agent_runtime.tools.tooldef",
    "ToolCall": "agent_runtime.store.records",
    "TooManyBadAnswers": "agent_runtime.errors",
    "UnexpectedError": "agent_runtime.errors",
    "UnknownAgent": "agent_runtime.errors",
    "UnknownTool": "agent_runtime.errors",
    "UnusableDecision": "agent_runtime.errors",
    "Wiring": "agent_runtime.tools.agent",
    "Worker": "agent_runtime.loop.worker",
    "WrongEndpoint": "agent_runtime.errors",
    "load_agent": "agent_runtime.tools.agent",
    "tool": "agent_runtime.tools.tooldef",
    "url_from_env": "agent_runtime.config",
}

if _typing.TYPE_CHECKING:
    from agent_runtime.config import Settings, url_from_env
    from agent_runtime.crash import CRASH_POINTS, CrashPlan, InjectedCrash
    from agent_runtime.errors import (
        AgentRuntimeError,
        BackingOff,
        CallInFlight,
        ConfigError,
        DatabaseError,
        InvalidArguments,
        InvalidRunId,
        LeaseLost,
        MalformedAnswer,
        ModelError,
        ModelUnavailable,
        NeedsAttention,
        RemoteError,
        RemoteRejected,
        RemoteUnavailable,
        RunNotFound,
        RunUnavailable,
        StaleGeneration,
        TooManyBadAnswers,
        UnexpectedError,
        UnknownAgent,
        UnknownTool,
        UnusableDecision,
        WrongEndpoint,
    )
    from agent_runtime.loop.outcome import Outcome
    from agent_runtime.loop.worker import Worker
    from agent_runtime.store.journal import Journal
    from agent_runtime.store.records import Decision, History, Lease, Run, RunTask, ToolCall
    from agent_runtime.supervisor.supervision import Supervisor
    from agent_runtime.tools.agent import Agent, Wiring, load_agent
    from agent_runtime.tools.tooldef import Call, Result, Tool, tool


def __getattr__(name: str) -> object:
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module 'agent_runtime' has no attribute {name!r}")
    value = getattr(_importlib.import_module(home), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
