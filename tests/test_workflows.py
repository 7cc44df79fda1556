"""The GitHub workflows parse, and keep the limits every run needs.

They cannot run here (no network to GitHub); this checks what can be checked offline.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

WORKFLOWS = Path(__file__).resolve().parent.parent / ".github" / "workflows"
NAMES = ["ci.yml", "nightly.yml"]


def _load(name: str) -> dict[str, Any]:
    doc = yaml.safe_load((WORKFLOWS / name).read_text(encoding="utf-8"))
    assert isinstance(doc, dict), f"{name} is not a mapping"
    return doc


def _triggers(doc: dict[str, Any]) -> dict[str, Any]:
    # YAML 1.1 (PyYAML) reads the bare key `on` as the boolean True.
    triggers = doc.get("on", doc.get(True))
    assert isinstance(triggers, dict)
    return triggers


def _steps(doc: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    return [(job, step) for job, body in doc["jobs"].items() for step in body["steps"]]


def test_the_workflow_folder_holds_exactly_the_checked_workflows() -> None:
    assert sorted(p.name for p in WORKFLOWS.glob("*.y*ml")) == sorted(NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_a_workflow_may_only_read_the_repository(name: str) -> None:
    assert _load(name)["permissions"] == {"contents": "read"}


@pytest.mark.parametrize("name", NAMES)
def test_every_job_has_a_time_limit(name: str) -> None:
    for job, body in _load(name)["jobs"].items():
        minutes = body.get("timeout-minutes")
        assert isinstance(minutes, int) and 0 < minutes <= 120, f"{name}: job {job}"


@pytest.mark.parametrize("name", NAMES)
def test_every_python_setup_caches_pip_keyed_on_the_pyproject(name: str) -> None:
    setups = [
        (job, step)
        for job, step in _steps(_load(name))
        if str(step.get("uses", "")).startswith("actions/setup-python@")
    ]
    assert setups, f"{name} sets up no Python"
    for job, step in setups:
        assert step["with"].get("cache") == "pip", f"{name}: job {job}"
        assert step["with"].get("cache-dependency-path") == "pyproject.toml", f"{name}: job {job}"


def test_ci_cancels_a_superseded_run_of_the_same_ref() -> None:
    concurrency = _load("ci.yml")["concurrency"]
    assert "github.ref" in concurrency["group"]
    assert concurrency["cancel-in-progress"] is True


def test_the_nightly_queues_instead_of_running_twice_at_once() -> None:
    concurrency = _load("nightly.yml")["concurrency"]
    assert "github.ref" in concurrency["group"]
    assert concurrency["cancel-in-progress"] is False  # a hunt in progress is not superseded


def test_ci_runs_once_per_commit_not_for_its_push_and_its_pull_request() -> None:
    triggers = _triggers(_load("ci.yml"))
    assert "pull_request" in triggers
    # A push to a branch with an open pull request would run every job a second time on
    # the same commit: pushes run CI only where no pull request does, on main.
    assert triggers["push"] == {"branches": ["main"]}
