"""The model's settings come from the environment, and a bad one is refused at the CLI.

Each case starts ``python -m agent_runtime run`` (and the supervisor, for ``--agent``) as
a real process: a bad value exits 2 with one ERROR line naming the variable or option to
fix, never a traceback, and nothing is written; a model name the server does not know is
refused by the server, and the run stops resumably saying to check ``MODEL_NAME``.
"""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest

from agent_runtime.errors import EXIT_USAGE

from .fix_runtime import AGENT_TIMEOUT, Agent, journal_rows

SUPPORT = ("run", "--agent", "tests.agents:support")


def refused(result: Any, *words: str) -> None:
    assert result.code == EXIT_USAGE, result.out
    assert "Traceback" not in result.out, result.out
    (line,) = [ln for ln in result.out.splitlines() if "ERROR" in ln]
    for word in words:
        assert word in line, line


def nothing_written(conn: Any) -> None:
    assert conn.execute("SELECT count(*) AS n FROM runs").fetchone()["n"] == 0


@pytest.mark.parametrize(
    ("env", "words"),
    [
        ({"MODEL_URL": "localhost:8002/v1"}, ("MODEL_URL", "'localhost:8002/v1'")),
        ({"MODEL_URL": "ftp://127.0.0.1/v1"}, ("MODEL_URL", "scheme 'ftp'")),
        ({"MODEL_URL": "http:///v1"}, ("MODEL_URL", "no host")),
        ({"MODEL_URL": "http://127.0.0.1:99999/v1"}, ("MODEL_URL", "does not parse")),
        ({"MODEL_PROTOCOL": "grpc"}, ("MODEL_PROTOCOL", "'grpc'")),
        ({"MODEL_TIMEOUT": "soon"}, ("MODEL_TIMEOUT must be a number of seconds", "'soon'")),
        ({"MODEL_TIMEOUT": "0"}, ("model_timeout must be a positive number",)),
        ({"MODEL_API_KEY": "sk-caf\u00e9"}, ("MODEL_API_KEY", "printable ASCII")),
        ({"MODEL_API_KEY": "sk-two words"}, ("MODEL_API_KEY",)),
        ({"OPENAI_API_KEY": "sk-line\n"}, ("OPENAI_API_KEY",)),
    ],
)
def test_a_bad_model_setting_exits_2_naming_the_variable_and_writes_nothing(
    env: dict[str, str], words: tuple[str, ...], agent: Agent, conn: Any, mock_servers: Any
) -> None:
    result = agent.run("bad-setting", *SUPPORT, **env)
    refused(result, *words)
    nothing_written(conn)
    assert mock_servers.calls("bad-setting") == 0


def test_a_refused_api_key_is_never_printed(agent: Agent, conn: Any) -> None:
    result = agent.run("secret", *SUPPORT, MODEL_API_KEY="sk-very-secret\n")
    refused(result, "MODEL_API_KEY")
    assert "sk-very-secret" not in result.out


@pytest.mark.parametrize(
    ("address", "words"),
    [
        ("tests.agents", "an agent is named as package.module:attribute"),
        ("no_such_package.agents:support", "cannot import 'no_such_package.agents'"),
        ("tests.agents:no_such_agent", "tests.agents:no_such_agent"),
        ("tests.agents:INSTRUCTIONS", "is not an agent_runtime.Agent"),
    ],
)
def test_a_bad_agent_address_exits_2_naming_the_option(
    address: str, words: str, agent: Agent, conn: Any
) -> None:
    refused(agent.run("bad-agent", "run", "--agent", address), f"--agent {address!r}", words)
    nothing_written(conn)
    supervisor = subprocess.run(
        [sys.executable, "-m", "agent_runtime.supervisor", "--once", "--agent", address],
        env=agent.env("bad-agent"),
        capture_output=True,
        text=True,
        timeout=AGENT_TIMEOUT,
    )
    assert supervisor.returncode == EXIT_USAGE, supervisor.stderr
    assert f"--agent {address!r}" in supervisor.stderr and "Traceback" not in supervisor.stderr


def test_a_model_name_the_server_does_not_know_stops_the_run_resumably_naming_model_name(
    agent: Agent, conn: Any, mock_servers: Any
) -> None:
    env = {
        "MODEL_URL": f"{mock_servers.model_url}/v1",
        "SUPPORT_URL": mock_servers.support_url,
        "MODEL_NAME": "gpt-nonexistent",
    }
    result = agent.run("unknown-model", *SUPPORT, **env)
    refused(result, "check MODEL_NAME", "gpt-nonexistent")
    assert "MODEL_URL does not point" not in result.out  # the URL is right: the name is not
    assert journal_rows(conn, "unknown-model") == {"decisions": [], "calls": []}
    run = conn.execute("SELECT status, owner FROM runs WHERE id = 'unknown-model'").fetchone()
    assert (run["status"], run["owner"]) == ("running", None)
