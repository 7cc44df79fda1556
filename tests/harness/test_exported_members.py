"""The public surface of crashresume is exactly the intended, sorted list."""

from __future__ import annotations
import __future__

import subprocess
import sys
import types

import crashresume

INTENDED = [
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


def test_all_is_the_intended_public_surface_in_sorted_order() -> None:
    assert crashresume.__all__ == INTENDED
    assert crashresume.__all__ == sorted(crashresume.__all__)


def test_every_exported_name_resolves_and_no_other_public_name_exists() -> None:
    for name in crashresume.__all__:
        assert getattr(crashresume, name) is not None
    public = {
        name
        for name, value in vars(crashresume).items()
        if not name.startswith("_")
        and not isinstance(value, types.ModuleType)  # submodules such as crashresume.cli
        and not isinstance(value, __future__._Feature)  # `from __future__ import annotations`
    }
    assert public == set(crashresume.__all__)
    assert set(dir(crashresume)) >= set(crashresume.__all__)


def test_an_unknown_attribute_is_an_attribute_error() -> None:
    assert not hasattr(crashresume, "conformance")


def test_loading_the_pytest_plugin_imports_no_harness_module() -> None:
    probe = (
        "import sys, crashresume.plugin; "
        "print(sorted(m for m in sys.modules if m.startswith('crashresume')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], check=True, capture_output=True, text=True
    ).stdout
    assert out.strip() == "['crashresume', 'crashresume.plugin']"


def test_the_harness_imports_no_third_party_module() -> None:
    probe = (
        "import sys; before = set(sys.modules); "
        "import crashresume, crashresume.cli, crashresume._selftest; crashresume.conform; "
        "new = {m.split('.')[0] for m in set(sys.modules) - before}; "
        "print(sorted(m for m in new if m not in sys.stdlib_module_names))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], check=True, capture_output=True, text=True
    ).stdout
    assert out.strip() == "['crashresume']"


def test_the_adapters_import_their_framework_only_when_used() -> None:
    probe = (
        "import sys; import crashresume, crashresume.adapters.http, "
        "crashresume.adapters.dbos, crashresume.adapters.langgraph; crashresume.conform; "
        "print(sorted(m for m in ('httpx', 'httpx2', 'dbos', 'langgraph', 'hypothesis') "
        "if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], check=True, capture_output=True, text=True
    ).stdout
    assert out.strip() == "[]"
