"""The model's settings come from the environment, and a bad one is refused at the CLI.

Each case starts ``python -m agent_runtime run`` (and the supervisor, for ``--agent``) as
a real process: a bad value exits 2 with one ERROR line naming the variable or option to
fix, never a traceback, and nothing is written; a model name the server does not know is
refused by the server, and the run stops resumably saying to check ``MODEL_NAME``.
"""

from __future__ import annotations

import http.server
import json
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from agent_runtime import config
from agent_runtime.errors import EXIT_RETRY_LATER, EXIT_USAGE

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


class Refusing(http.server.BaseHTTPRequestHandler):
    """A model server that answers every POST with the status its server names."""

    server: RefusingServer

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length", 0))
        self.rfile.read(length)
        self.server.seen.append((self.path, self.headers.get("authorization")))
        status, body = self.server.answer
        payload = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, format: str, *args: Any) -> None:
        pass  # the test reads what it saw, not stderr


class RefusingServer(http.server.ThreadingHTTPServer):
    def __init__(self, answer: tuple[int, Any]) -> None:
        super().__init__(("127.0.0.1", 0), Refusing)
        self.answer = answer
        self.seen: list[tuple[str, str | None]] = []


@pytest.fixture
def refusing() -> Iterator[Callable[[int, Any], RefusingServer]]:
    started: list[RefusingServer] = []

    def start(status: int, body: Any) -> RefusingServer:
        server = RefusingServer((status, body))
        threading.Thread(target=server.serve_forever, daemon=True).start()
        started.append(server)
        return server

    yield start
    for server in started:
        server.shutdown()
        server.server_close()


def _url(server: RefusingServer) -> str:
    host, port = server.server_address[:2]
    return f"http://{host!s}:{port}/v1"


def test_a_model_that_refuses_the_key_exits_2_naming_model_api_key_and_stays_resumable(
    agent: Agent, conn: Any, mock_servers: Any, refusing: Callable[[int, Any], RefusingServer]
) -> None:
    server = refusing(401, {"error": {"message": "Incorrect API key", "code": "invalid_api_key"}})
    desk = mock_servers.support_url
    result = agent.run(
        "refused-key", *SUPPORT, MODEL_URL=_url(server), MODEL_API_KEY="sk-old", SUPPORT_URL=desk
    )
    refused(result, "ConfigError", "HTTP 401 invalid_api_key", "check MODEL_API_KEY")
    assert server.seen == [("/v1/chat/completions", "Bearer sk-old")]  # asked once, not again
    assert journal_rows(conn, "refused-key") == {"decisions": [], "calls": []}
    run = conn.execute("SELECT status, owner FROM runs WHERE id = 'refused-key'").fetchone()
    assert (run["status"], run["owner"]) == ("running", None)


def test_a_model_that_keeps_answering_503_exits_4_after_its_retries_and_stays_resumable(
    agent: Agent, conn: Any, mock_servers: Any, refusing: Callable[[int, Any], RefusingServer]
) -> None:
    server = refusing(503, {"error": {"message": "overloaded", "code": "overloaded"}})
    desk = mock_servers.support_url
    result = agent.run("overloaded", *SUPPORT, MODEL_URL=_url(server), SUPPORT_URL=desk)
    assert result.code == EXIT_RETRY_LATER, result.out
    assert "Traceback" not in result.out
    assert len(server.seen) == 1 + config.MODEL_RETRIES
    assert len(result.lines("model-retry")) == config.MODEL_RETRIES
    (line,) = [ln for ln in result.out.splitlines() if ln.startswith("ERROR")]
    assert "ModelUnavailable" in line and "HTTP 503 overloaded" in line and "resumable" in line
    assert journal_rows(conn, "overloaded") == {"decisions": [], "calls": []}
