"""The house rules a machine can check: ``ruff`` (lint and format) over the whole tree and
``mypy --strict`` over everything that ships (``[tool.mypy] files`` in pyproject.toml).

CI runs only the README's test command, so the checks are tests: a change that leaves a
lint error or an untyped function fails CI, not only a developer's pre-commit hook.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True, check=False
    )


@pytest.mark.parametrize(
    "command",
    [("ruff", "check", "."), ("ruff", "format", "--check", ".")],
    ids=["ruff-check", "ruff-format"],
)
def test_ruff_finds_nothing(command: tuple[str, ...]) -> None:
    done = _run(*command)
    assert done.returncode == 0, done.stdout + done.stderr


def test_mypy_strict_finds_nothing_in_what_ships() -> None:
    done = _run("mypy")  # strict, over [tool.mypy] files: src, the mocks, properties, examples
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Success: no issues found" in done.stdout
