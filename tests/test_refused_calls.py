"""Refused calls survive crashes as they were journaled; results the journal cannot hold
fail their call, not the run; a CRASH_AT the run never reached is said at exit.

A scripted Chat Completions model (``httpx.MockTransport``) answers a worker with a real
journal; the crashes are :class:`~agent_runtime.crash.InjectedCrash` at the named points,
and a real ``python -m agent_runtime`` process against the mock model where the exit is
the point.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from agent_runtime.config import Settings
from agent_runtime.crash import CrashPlan, InjectedCrash, raise_crash
from agent_runtime.errors import EXIT_CRASH_NOT_REACHED, TooManyBadAnswers
from agent_runtime.loop.worker import Worker
from agent_runtime.store import db
from agent_runtime.store.journal import Journal
from agent_runtime.tools.agent import Agent
from agent_runtime.tools.tooldef import Call, tool

from . import fix_runtime

RUN = "refused"
FINAL = {"role": "assistant", "content": "all done"}


def call(name: str, arguments: str, call_id: str = "call_0") -> dict[str, Any]:
    function = {"name": name, "arguments": arguments}
    return {
        "role": "assistant",
        "tool_calls": [{"id": call_id, "type": "function", "function": function}],
    }


class Scripted(httpx.BaseTransport):
    """Answers the n-th question with ``script(n, body)``; keeps every question's body."""

    def __init__(self, script: Callable[[int, dict[str, Any]], dict[str, Any]]) -> None:
        self.script = script
        self.questions: list[dict[str, Any]] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.read())
        self.questions.append(body)
        message = self.script(len(self.questions), body)
        return httpx.Response(200, json={"choices": [{"message": message}]}, request=request)


measured: list[str] = []


@tool(effect="read")
def measure(call: Call, what: str) -> Any:
    """Measure something; what comes back may not be JSON the journal can hold."""
    measured.append(what)
    return {"nan": math.nan, "inf": [-math.inf], "nul": {"a\x00b": 1}}[what]


AGENT = Agent(name="measurer", tools=[measure], model="scripted", input="measure")


def worker(conn: db.Connection, model: httpx.BaseTransport, **settings: Any) -> Worker:
    crash = settings.pop("crash", None)
    return Worker.build(
        Journal(conn),
        Settings(model_url="http://model/v1", **settings),
        agents=AGENT,
        transports={"model": model},
        crash=crash,
        sleep=lambda s: None,
    )


def run(conn: db.Connection, model: httpx.BaseTransport, **settings: Any) -> Any:
    w = worker(conn, model, **settings)
    try:
        return w.run(RUN, agent=AGENT, takeover=True)
    finally:
        w.close_clients()


def tool_messages(question: dict[str, Any]) -> list[dict[str, Any]]:
    return [m for m in question["messages"] if m["role"] == "tool"]


@pytest.mark.parametrize("point", ["after_decide", "before_decide"])
def test_a_crash_after_a_refused_call_replays_it_and_never_buys_it_again(
    point: str, conn: db.Connection
) -> None:
    def script(n: int, body: dict[str, Any]) -> dict[str, Any]:
        return call("weigh", "{}") if n == 1 else FINAL

    model = Scripted(script)
    seq = 0 if point == "after_decide" else 1  # at the refused step, or right before the next
    with pytest.raises(InjectedCrash):
        run(conn, model, crash=CrashPlan(point=point, seq=seq, action=raise_crash))
    assert len(model.questions) == 1
    outcome = run(conn, model)
    assert (outcome.status, outcome.output, outcome.llm_calls) == ("done", "all done", 2)
    assert len(model.questions) == 2  # the refused answer was not bought again
    (shown,) = tool_messages(model.questions[1])  # shown once, answering its call
    assert shown["tool_call_id"] == "call_0"
    assert json.loads(shown["content"])["error"] == "UnknownTool"


def test_a_crash_after_the_answer_past_the_limit_fails_the_run_without_asking_again(
    conn: db.Connection,
) -> None:
    model = Scripted(lambda n, body: call("weigh", "{}", f"c{n}"))
    crash = CrashPlan(point="after_decide", seq=1, action=raise_crash)
    with pytest.raises(InjectedCrash):
        run(conn, model, max_bad_answers=1, crash=crash)
    with pytest.raises(TooManyBadAnswers, match="gave 2 answers"):
        run(conn, model, max_bad_answers=1)
    assert len(model.questions) == 2
    status = conn.execute("SELECT status, llm_calls FROM runs WHERE id = %s", (RUN,)).fetchone()
    assert status == {"status": "failed", "llm_calls": 2}


@pytest.mark.parametrize(
    ("what", "words"),
    [
        ("nan", "(nan) at result"),
        ("inf", "(-inf) at result[0]"),
        ("nul", "U+0000 in a key at result"),
    ],
)
def test_a_result_the_journal_cannot_hold_fails_the_call_and_the_model_hears_why(
    what: str, words: str, conn: db.Connection
) -> None:
    def script(n: int, body: dict[str, Any]) -> dict[str, Any]:
        return call("measure", json.dumps({"what": what})) if n == 1 else FINAL

    model = Scripted(script)
    measured.clear()
    outcome = run(conn, model)
    assert outcome.status == "done" and measured == [what]
    (shown,) = tool_messages(model.questions[1])
    result = json.loads(shown["content"])
    assert result["error"] == "UnjournalableResult" and words in result["message"]
    row = conn.execute("SELECT state, result FROM tool_calls WHERE run_id = %s", (RUN,)).fetchone()
    assert row == {"state": "failed", "result": result}


def test_a_crash_point_the_run_never_reaches_is_said_at_exit(
    agent: fix_runtime.Agent, conn: db.Connection
) -> None:
    beyond = agent.run("unreached", CRASH_AT="after_call", CRASH_SEQ="3")  # seq 3: done
    assert beyond.code == EXIT_CRASH_NOT_REACHED, beyond.out
    (line,) = beyond.lines("crash-not-reached")
    assert line == "WARNING crash-not-reached run=unreached point=after_call seq=3 steps=3"
    status = conn.execute("SELECT status FROM runs WHERE id = 'unreached'").fetchone()
    assert status == {"status": "done"}
    done = agent.run("unreached", CRASH_AT="before_decide")  # any step: the run is done
    assert done.code == EXIT_CRASH_NOT_REACHED, done.out
    assert done.lines("crash-not-reached") == [
        "WARNING crash-not-reached run=unreached point=before_decide seq=any steps=3"
    ]
    assert agent.run("unreached").code == 0  # without a crash plan, done is done


class Decide(httpx.BaseTransport):
    """The seed protocol's model (``POST /v1/decide``): always the same answer."""

    def __init__(self, answer: dict[str, Any]) -> None:
        self.answer = answer
        self.asked = 0

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.asked += 1
        return httpx.Response(200, json=self.answer, request=request)


def test_a_final_answer_with_arguments_is_journaled_with_them_and_bought_once(
    conn: db.Connection,
) -> None:
    """The seed protocol lets a final answer carry arguments; refusing it would answer no
    call, so the paid answer would be asked for again on every attempt (issue 22)."""
    agent = Agent(name="finisher", tools=[measure], protocol="decide", input="finish")
    model = Decide({"tool": "done", "args": {"summary": "nothing to measure"}})
    crash = CrashPlan(point="after_decide", seq=0, action=raise_crash)
    for plan in (crash, None):
        w = Worker.build(
            Journal(conn),
            Settings(model_url="http://model"),
            agents=agent,
            transports={"model": model},
            crash=plan,
            sleep=lambda s: None,
        )
        try:
            if plan is not None:
                with pytest.raises(InjectedCrash):
                    w.run(RUN, agent=agent, takeover=True)
            else:
                outcome = w.run(RUN, agent=agent, takeover=True)
        finally:
            w.close_clients()
    assert (outcome.status, outcome.llm_calls, model.asked) == ("done", 1, 1)
    decision = conn.execute("SELECT tool, args FROM decisions WHERE run_id = %s", (RUN,)).fetchone()
    assert decision == {"tool": "done", "args": {"summary": "nothing to measure"}}
