"""A model answer the journal cannot hold is a MalformedAnswer before anything is written.

A fake model (real HTTP on 127.0.0.1, one canned body for every question) answers a real
``python -m agent_runtime`` process with each value ``jsonb`` refuses, or our own limits
(``agent_runtime.store.journalable``) do. Each must stop the run resumably (exit 4) with one
line saying which, journal nothing and count no answer; and a run whose model keeps
answering so is failed by the supervisor's give-up with that reason, its pool worker
kept (before: a database error, exit 70 with a traceback, a fresh worker per attempt).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from agent_runtime.errors import EXIT_RETRY_LATER
from agent_runtime.store.journal import Journal
from agent_runtime.store.journalable import MAX_DEPTH, MAX_STRING

from .fix_runtime import Agent
from .fix_supervisor import SupervisorProcess


class FakeModel:
    """Answers every POST with ``body`` (bytes, sent as JSON) and counts the questions."""

    def __init__(self) -> None:
        self.body = b"{}"
        self.asked = 0
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length", "0")))
                fake.asked += 1
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(fake.body)))
                self.end_headers()
                self.wfile.write(fake.body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def fake_model() -> Iterator[FakeModel]:
    model = FakeModel()
    yield model
    model.close()


def decide(args: str) -> bytes:
    """The decide protocol's answer calling create_server with ``args`` (JSON text)."""
    return f'{{"tool": "create_server", "args": {args}}}'.encode()


def chat(message: dict[str, Any], usage: str = "null") -> bytes:
    text = json.dumps({"choices": [{"message": message}]})
    return (text[:-1] + f', "usage": {usage}}}').encode()


SERVER = '"size": "small", "region": "local-1"'
CHAT = {"MODEL_PROTOCOL": "chat", "MODEL_NAME": "fake"}

# (the model's body, the worker's protocol, words the reason must say)
CASES: dict[str, tuple[bytes, dict[str, str], str]] = {
    "U+0000 in the arguments": (
        decide('{"name": "srv\\u0000", ' + SERVER + "}"),
        {},
        "cannot be journaled: U+0000 at message.args.name",
    ),
    "U+0000 in a Chat Completions call's arguments": (
        chat(
            {
                "role": "assistant",
                "tool_calls": [
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {
                            "name": "create_server",
                            "arguments": '{"name": "a\\u0000", ' + SERVER + "}",
                        },
                    }
                ],
            }
        ),
        CHAT,
        "cannot be journaled: U+0000 at call 0 ('create_server')'s arguments.name",
    ),
    "U+0000 in the content": (
        chat({"role": "assistant", "content": "done\u0000"}),
        CHAT,
        "cannot be journaled: U+0000 at message.content",
    ),
    "a lone surrogate": (
        decide('{"name": "srv\\ud800", ' + SERVER + "}"),
        {},
        "a lone surrogate U+D800 at message.args.name",
    ),
    "nested 100,000 deep": (
        decide("[" * 100_000 + "]" * 100_000),
        {},
        "the model's answer is nested deeper than a JSON parser goes",
    ),
    "nested past the limit": (
        decide("[" * (MAX_DEPTH + 5) + "]" * (MAX_DEPTH + 5)),
        {},
        f"nesting deeper than {MAX_DEPTH} levels at message.args",
    ),
    "NaN": (decide('{"name": NaN}'), {}, "(nan) at message.args.name"),
    "Infinity": (decide('{"name": -Infinity}'), {}, "(-inf) at message.args.name"),
    "a number too big for a float": (decide('{"name": 1e400}'), {}, "(inf) at message.args"),
    "an integer of 4100 digits": (
        decide('{"name": ' + "9" * 4100 + "}"),
        {},
        "an integer of 4000 digits or more at message.args.name",
    ),
    "NaN in the usage": (
        chat({"role": "assistant", "content": "done"}, usage='{"total_tokens": NaN}'),
        CHAT,
        "(nan) at usage.total_tokens",
    ),
    "a string past the limit": (
        decide('{"name": "' + "x" * (MAX_STRING + 1) + '", ' + SERVER + "}"),
        {},
        f"a string of {MAX_STRING + 1} characters (the limit is {MAX_STRING}) at message.args",
    ),
}


def _journaled(conn: Any, run_id: str) -> dict[str, Any]:
    row = conn.execute(
        "SELECT status, owner, llm_calls, failure,"
        " (SELECT count(*) FROM model_answers WHERE run_id = r.id) AS answers,"
        " (SELECT count(*) FROM decisions WHERE run_id = r.id) AS decisions,"
        " (SELECT count(*) FROM tool_calls WHERE run_id = r.id) AS calls"
        " FROM runs r WHERE id = %s",
        (run_id,),
    ).fetchone()
    assert row is not None
    return dict(row)


@pytest.mark.parametrize("case", list(CASES))
def test_an_answer_the_journal_cannot_hold_stops_the_run_resumably_saying_why(
    case: str, agent: Agent, conn: Any, fake_model: FakeModel
) -> None:
    body, protocol, words = CASES[case]
    fake_model.body = body
    url = fake_model.url + ("/v1" if protocol else "")
    result = agent.run("unheld", MODEL_URL=url, **protocol)
    assert result.code == EXIT_RETRY_LATER, result.out
    (line,) = [ln for ln in result.out.splitlines() if ln.startswith("ERROR")]
    assert line.startswith('ERROR stopped run=unheld resumable=yes reason="MalformedAnswer: ')
    assert words in line and "Traceback" not in result.out
    assert fake_model.asked == 1
    run = _journaled(conn, "unheld")
    assert (run["status"], run["owner"], run["llm_calls"]) == ("running", None, 0)
    assert (run["answers"], run["decisions"], run["calls"]) == (0, 0, 0)
    assert words in run["failure"]


def test_a_model_that_keeps_answering_so_is_given_up_on_with_the_reason_by_one_pool_worker(
    agent: Agent, conn: Any, fake_model: FakeModel
) -> None:
    fake_model.body = CASES["U+0000 in the arguments"][0]
    Journal(conn).create_run("poison")
    env = {**agent.env("poison", MODEL_URL=fake_model.url)}
    env.pop("RUN_ID")
    sup = SupervisorProcess(
        env,
        *("--once", "--poll", "0.1", "--lease", "12", "--heartbeat", "3"),
        *("--max-attempts", "3", "--give-up-after", "0", "--run-backoff", "0"),
        *("--max-workers", "1"),
    )
    try:
        assert sup.wait() == 0, sup.text
    finally:
        if sup.proc.poll() is None:
            sup.stop()
    run = _journaled(conn, "poison")
    assert run["status"] == "failed", sup.text
    assert run["failure"].startswith("gave up after 3 attempts")
    assert "MalformedAnswer: the model's answer cannot be journaled: U+0000" in run["failure"]
    assert (run["answers"], run["decisions"], run["calls"], run["llm_calls"]) == (0, 0, 0, 0)
    assert fake_model.asked == 3
    assert sup.exits("poison") == [("poison", EXIT_RETRY_LATER)] * 3
    assert {pid for _, pid in sup.resumed("poison")} == {sup.resumed("poison")[0][1]}  # one
    assert "worker-gone" not in sup.text.split("gave-up")[0] and "Traceback" not in sup.text
