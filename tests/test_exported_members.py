"""The public surface of agent_runtime is exactly the intended, sorted list, loaded lazily."""

from __future__ import annotations
import __future__

import subprocess
import sys
import types

import agent_runtime

INTENDED = [
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


def _isort_order(name: str) -> tuple[int, str]:
    """Constants, then classes, then the rest, each alphabetically (ruff's RUF022 order)."""
    return (0 if name.isupper() else 1 if name[0].isupper() else 2, name)


def test_all_is_the_intended_public_surface_in_sorted_order() -> None:
    assert agent_runtime.__all__ == INTENDED
    assert agent_runtime.__all__ == sorted(agent_runtime.__all__, key=_isort_order)


def test_every_exported_name_resolves_to_the_runtimes_own_object() -> None:
    for name in agent_runtime.__all__:
        value = getattr(agent_runtime, name)
        home = getattr(value, "__module__", None) or "agent_runtime.crash"  # CRASH_POINTS
        assert home.startswith("agent_runtime."), (name, home)
    public = {
        name
        for name, value in vars(agent_runtime).items()
        if not name.startswith("_")
        and not isinstance(value, types.ModuleType)  # submodules such as agent_runtime.store.db
        and not isinstance(value, __future__._Feature)  # `from __future__ import annotations`
    }
    assert public == set(agent_runtime.__all__)
    assert set(dir(agent_runtime)) >= set(agent_runtime.__all__)


def test_an_unknown_attribute_is_an_attribute_error_and_submodules_still_import() -> None:
    assert not hasattr(agent_runtime, "SimulatedCrash")  # the harness's name, not ours
    from agent_runtime.store import db  # a submodule, not an exported name

    assert db.__name__ == "agent_runtime.store.db"


def test_importing_the_package_imports_none_of_its_modules() -> None:
    probe = (
        "import sys, agent_runtime; "
        "print(sorted(m for m in sys.modules if m.startswith('agent_runtime')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], check=True, capture_output=True, text=True
    ).stdout
    assert out.strip() == "['agent_runtime']"
