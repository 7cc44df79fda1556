"""An agent's own remote URLs are checked at start, as CLOUD_URL and MODEL_URL are.

Every URL an example agent reads goes through :func:`agent_runtime.url_from_env`: a bad
one stops the agent's process before it touches a run, exit 2, one line naming the
variable and what is wrong, never a traceback (exit 70).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from agent_runtime import ConfigError, url_from_env

REPO = Path(__file__).resolve().parents[1]
BAD = {
    "::::": "does not parse",
    "ftp://desk.example": "scheme 'ftp'",
    "desk.example:8003": "scheme 'desk.example'",
    "http://": "no host",
    "http://127.0.0.1:99999": "does not parse",
    "http://desk example": "whitespace",
}
COMMANDS = {
    "run": ["agent_runtime", "run", "--agent", "examples.support:agent", "--run-id", "url-1"],
    "supervise": ["agent_runtime.supervisor", "--once", "--agent", "examples.support:agent"],
}


def _agent_process(database_url: str, command: list[str], support_url: str) -> tuple[int, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("CRASH_AT", "RUN_ID")}
    env.update(DATABASE_URL=database_url, SUPPORT_URL=support_url)
    proc = subprocess.run(
        [sys.executable, "-m", *command],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    return proc.returncode, proc.stdout + proc.stderr


@pytest.mark.parametrize("command", sorted(COMMANDS))
@pytest.mark.parametrize("value", sorted(BAD))
def test_the_support_agent_with_a_bad_support_url_stops_at_start_in_one_line(
    database_url: str, command: str, value: str
) -> None:
    code, out = _agent_process(database_url, COMMANDS[command], value)
    assert code == 2, out
    assert "Traceback" not in out
    lines = out.strip().splitlines()
    assert len(lines) == 1, out
    assert lines[0].startswith("ERROR ConfigError ")
    assert "SUPPORT_URL must be an http:// or https:// URL with a host" in lines[0]
    assert BAD[value] in lines[0]


def test_the_support_example_command_does_not_read_support_url() -> None:
    """``python -m examples.support`` starts its own desk: a stray SUPPORT_URL in the shell
    does not stop it (the agent is made from SUPPORT_URL only when it is asked for)."""
    env = {**os.environ, "SUPPORT_URL": "::::"}
    probe = "import examples.support.__main__, examples.support as s; print(s.support_agent)"
    proc = subprocess.run(
        [sys.executable, "-c", probe], cwd=REPO, env=env, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr


def test_url_from_env_gives_the_default_when_unset_or_empty_and_the_value_when_good() -> None:
    default = "http://127.0.0.1:8003"
    assert url_from_env("DESK_URL", default, env={}) == default
    assert url_from_env("DESK_URL", default, env={"DESK_URL": ""}) == default
    given = "https://desk.example/api"
    assert url_from_env("DESK_URL", default, env={"DESK_URL": given}) == given


def test_url_from_env_names_the_variable_the_value_and_the_example() -> None:
    with pytest.raises(ConfigError) as refused:
        url_from_env("DESK_URL", "http://127.0.0.1:8003", env={"DESK_URL": "ftp://x"})
    assert str(refused.value) == (
        "DESK_URL must be an http:// or https:// URL with a host, such as "
        "http://127.0.0.1:8003; got 'ftp://x' (scheme 'ftp')"
    )
