"""crashresume: prove that an agent survives a crash at any side-effect boundary.

The public surface is below; everything else lives in ``_private`` modules. Names are loaded
on first use (PEP 562), so that importing ``crashresume.plugin`` (which pytest does for every
session) costs nothing until a test asks for the ``conform`` fixture.
"""

from __future__ import annotations

import importlib as _importlib
import typing as _typing

__all__ = [
    "BaselineError",
    "Context",
    "CrashResumeError",
    "Finding",
    "FindingKind",
    "InjectedFault",
    "IsolationError",
    "Report",
    "SimulatedCrash",
    "UsageError",
    "conform",
    "current_context",
]

_HOME = {
    "BaselineError": "crashresume._errors",
    "Context": "crashresume._context",
    "CrashResumeError": "crashresume._errors",
    "Finding": "crashresume._findings",
    "FindingKind": "crashresume._findings",
    "InjectedFault": "crashresume._faults",
    "IsolationError": "crashresume._errors",
    "Report": "crashresume._report",
    "SimulatedCrash": "crashresume._errors",
    "UsageError": "crashresume._errors",
    "conform": "crashresume._conform",
    "current_context": "crashresume._context",
}

if _typing.TYPE_CHECKING:
    from crashresume._conform import conform
    from crashresume._context import Context, current_context
    from crashresume._errors import (
        BaselineError,
        CrashResumeError,
        IsolationError,
        SimulatedCrash,
        UsageError,
    )
    from crashresume._faults import InjectedFault
    from crashresume._findings import Finding, FindingKind
    from crashresume._report import Report


def __getattr__(name: str) -> object:
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module 'crashresume' has no attribute {name!r}")
    value = getattr(_importlib.import_module(home), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
