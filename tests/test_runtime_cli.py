"""The runtime's command lines as a user meets them: version, help, a quiet start."""

from __future__ import annotations

import subprocess
import sys
from importlib import metadata

import pytest

from agent_runtime.cli import build_parser
from agent_runtime.config import from_env
from agent_runtime.localpg import dbsource

PROGRAMS = ["agent_runtime", "agent_runtime.supervisor"]


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, timeout=60, check=False
    )


@pytest.mark.parametrize("module", PROGRAMS)
def test_version_prints_the_installed_version(module: str) -> None:
    out = _run("-m", module, "--version")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == f"python -m {module} {metadata.version('crashresume')}"


@pytest.mark.parametrize("module", PROGRAMS)
def test_starting_a_module_of_the_package_raises_no_warning(module: str) -> None:
    # runpy warns when the package's __init__ already imported the module it is asked to
    # run; with warnings as errors that warning is a non-zero exit.
    out = _run("-W", "error", "-m", module, "--help")
    assert out.returncode == 0, out.stderr
    assert out.stderr == ""


class _Recording(dict[str, str]):
    """An empty environment that remembers every name it was asked for."""

    def __init__(self) -> None:
        super().__init__()
        self.asked: set[str] = set()

    def get(self, key: str, default: str | None = None) -> str | None:  # type: ignore[override]
        self.asked.add(key)
        return super().get(key, default)


def test_the_help_names_every_environment_variable_the_cli_reads() -> None:
    env = _Recording()
    from_env(env)
    read = env.asked | {dbsource.DATABASE_URL_ENV, dbsource.HOME_ENV, "RUN_ID"}
    assert {"POLL", "TOOL_TIMEOUT", "MODEL_TIMEOUT", "CRASH_SEQ"} <= read  # the probe works
    epilog = build_parser().epilog or ""
    named = {word.strip("(),;.") for word in epilog.split()}
    assert sorted(read - named) == []
