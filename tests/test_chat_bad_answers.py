"""Every unusable Chat Completions answer is one specific error, and costs the run nothing.

A worker with a real journal asks a model that answers badly (a canned HTTP answer from an
``httpx.MockTransport``, or the mock model's own latency knob for a timeout), then a
healthy one. A bad answer must stop the run with an error that says what was wrong,
journal nothing (no answer, no decision, no call), leave the run resumable, and the next
worker must finish it as if nothing had happened. An answer whose call the runtime refuses
(an unknown tool, invalid arguments) is journaled instead, and the refusal shown to the
model as that call's result, up to ``max_bad_answers`` times.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from agent_runtime import config
from agent_runtime.config import Settings
from agent_runtime.errors import (
    ConfigError,
    InvalidArguments,
    MalformedAnswer,
    ModelError,
    ModelUnavailable,
    TooManyBadAnswers,
    UnknownTool,
    WrongEndpoint,
)
from agent_runtime.loop.worker import Worker
from agent_runtime.store import clock, db
from agent_runtime.store.journal import Journal
from mock_remotes import Cloud, Model, cloud_transport, model_transport

from .agents import provisioning_parallel
from .recording import Recording

RUN = "bad-answer"
PARALLEL = provisioning_parallel
RETRIES = 3  # extra attempts the model client makes at a transient failure

Handler = Callable[[httpx.Request], httpx.Response]


def completion(message: dict[str, Any]) -> dict[str, Any]:
    return {"id": "chatcmpl-1", "object": "chat.completion", "choices": [{"message": message}]}


def calling(*calls: tuple[str, Any]) -> dict[str, Any]:
    """An answer proposing ``calls`` (name, arguments as sent on the wire)."""
    return completion(
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": f"call_{i}", "type": "function", "function": {"name": n, "arguments": a}}
                for i, (n, a) in enumerate(calls)
            ],
        }
    )


SERVER = json.dumps({"name": "web", "size": "small", "region": "local-1"})


def answer(status: int, body: Any = None, *, content: bytes | None = None, **headers: str) -> Any:
    def handle(request: httpx.Request) -> httpx.Response:
        if content is not None:
            return httpx.Response(status, content=content, headers=headers)
        return httpx.Response(status, json=body, headers=headers)

    return handle


# (what the model answers, the error, words the error must say)
BAD_ANSWERS: dict[str, tuple[Handler, type[Exception], str]] = {
    "not JSON": (answer(200, content=b"<html>oops"), MalformedAnswer, "not JSON: '<html>oops'"),
    "cut short": (answer(200, content=b'{"choices": [{"mess'), MalformedAnswer, "not JSON"),
    "no choices": (answer(200, {"object": "chat.completion"}), MalformedAnswer, "no choices"),
    "empty choices": (answer(200, {"choices": []}), MalformedAnswer, "no choices[0].message"),
    "a list": (answer(200, [1, 2]), MalformedAnswer, "no choices[0].message"),
    "message not an object": (
        answer(200, {"choices": [{"message": "hi"}]}),
        MalformedAnswer,
        "message is not an object",
    ),
    "tool_calls not a list": (
        answer(200, completion({"role": "assistant", "tool_calls": {"a": 1}})),
        MalformedAnswer,
        "tool_calls is not a list",
    ),
    "a call naming no function": (
        answer(200, completion({"role": "assistant", "tool_calls": [{"id": "x"}]})),
        MalformedAnswer,
        "tool call 0 of the model's answer names no function",
    ),
    "arguments an object, not a JSON text": (
        answer(200, calling(("create_server", json.loads(SERVER)))),
        MalformedAnswer,
        "must be a JSON text (a string), got dict",
    ),
    "a body whose encoding lies": (
        answer(200, content=b"not gzip at all", **{"content-encoding": "gzip"}),
        MalformedAnswer,
        "cannot be decoded",
    ),
    "401": (
        answer(401, {"error": {"message": "Incorrect API key", "code": "invalid_api_key"}}),
        ConfigError,
        "HTTP 401 invalid_api_key: Incorrect API key); check MODEL_API_KEY",
    ),
    "403": (answer(403, {"error": {"message": "no access"}}), ConfigError, "MODEL_API_KEY"),
    "404 wrong endpoint": (
        answer(404, {"detail": "Not Found"}),
        WrongEndpoint,
        "MODEL_URL does not point at the model",
    ),
    "404 unknown model": (
        answer(
            404,
            {"error": {"message": "The model `gpt-x` does not exist", "code": "model_not_found"}},
        ),
        ConfigError,
        "check MODEL_NAME",
    ),
    "400": (
        answer(400, {"error": {"message": "context too long", "code": "context_length_exceeded"}}),
        ModelError,
        "HTTP 400 context_length_exceeded: context too long",
    ),
}


# Answers the runtime journals and shows back to the model: (what the model answers, the
# error the model is shown as the refused call's result, words it must say, the refused
# call's index in the answer)
FED_BACK: dict[str, tuple[Handler, type[Exception], str, int]] = {
    "unknown tool": (
        answer(200, calling(("drop_database", "{}"))),
        UnknownTool,
        "'drop_database', which does not exist; known tools: create_database, "
        "create_dns_record, create_server",
        0,
    ),
    "arguments not JSON": (
        answer(200, calling(("create_server", SERVER[:-1]))),
        InvalidArguments,
        "arguments of the model's call to create_server are not JSON",
        0,
    ),
    "arguments against the schema": (
        answer(200, calling(("create_server", SERVER.replace("small", "huge")))),
        InvalidArguments,
        "create_server: size",
        0,
    ),
    "arguments missing a field": (
        answer(200, calling(("create_server", '{"name": "web", "size": "small"}'))),
        InvalidArguments,
        "region",
        0,
    ),
    "a good call paired with an unknown one": (
        answer(200, calling(("create_server", SERVER), ("delete_everything", "{}"))),
        UnknownTool,
        "'delete_everything'",
        1,
    ),
}


class Faulty(httpx.BaseTransport):
    """Answers the first ``times`` requests with ``handler``, then passes them to ``inner``."""

    def __init__(self, handler: Handler, inner: httpx.BaseTransport, times: int) -> None:
        self.handler = handler
        self.inner = inner
        self.left = times
        self.served = 0

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        if self.left:
            self.left -= 1
            self.served += 1
            response = self.handler(request)
            response.request = request
            return response
        return self.inner.handle_request(request)


@pytest.fixture
def cloud(tmp_path: Path) -> Iterator[Cloud]:
    with Cloud(tmp_path / "cloud.sqlite3") as fresh:
        yield fresh


def worker(
    conn: db.Connection,
    cloud: Cloud,
    model: httpx.BaseTransport,
    sleeps: list[float] | None = None,
    **settings: Any,
) -> Worker:
    waits = sleeps if sleeps is not None else []
    return Worker.build(
        Journal(conn),
        Settings(model_url="http://model/v1", model_retries=RETRIES, **settings),
        agents=PARALLEL,
        transports={"model": model, "cloud": cloud_transport(cloud)},
        sleep=waits.append,
        rand=lambda: 0.5,
    )


JOURNALED = """
SELECT (SELECT count(*) FROM model_answers WHERE run_id = %(run)s) AS model_answers,
       (SELECT count(*) FROM decisions WHERE run_id = %(run)s) AS decisions,
       (SELECT count(*) FROM tool_calls WHERE run_id = %(run)s) AS tool_calls
"""


def journaled(conn: db.Connection) -> dict[str, int]:
    row = conn.execute(JOURNALED, {"run": RUN}).fetchone()
    assert row is not None
    return dict(row)


def stopped_resumably(conn: db.Connection, error: type[Exception]) -> None:
    """Nothing journaled; the run free, not failed, its reason kept."""
    assert journaled(conn) == {"model_answers": 0, "decisions": 0, "tool_calls": 0}
    run = conn.execute(
        "SELECT status, owner, llm_calls, failure FROM runs WHERE id = %s", (RUN,)
    ).fetchone()
    assert run is not None
    assert (run["status"], run["owner"], run["llm_calls"]) == ("running", None, 0)
    assert run["failure"].startswith(f"{error.__name__}: ")


def finishes_afterwards(conn: db.Connection, cloud: Cloud, model: Model) -> None:
    clock.advance(conn, config.RUN_BACKOFF_CAP)  # past the backoff of the stopped run
    healthy = worker(conn, cloud, model_transport(model))
    try:
        outcome = healthy.run(RUN)
    finally:
        healthy.close_clients()
    assert (outcome.status, outcome.steps, outcome.llm_calls) == ("done", 3, 3)
    assert cloud.counts(RUN) == {"servers": 1, "databases": 1, "dns_records": 1}


@pytest.mark.parametrize("case", list(BAD_ANSWERS))
@pytest.mark.usefixtures("frozen_clock")
def test_a_bad_answer_is_a_specific_error_that_journals_nothing_and_loses_nothing(
    case: str, conn: db.Connection, cloud: Cloud
) -> None:
    handler, error, words = BAD_ANSWERS[case]
    model = Model()
    faulty = Faulty(handler, model_transport(model), times=1)
    bad = worker(conn, cloud, faulty)
    with pytest.raises(error) as info:
        bad.run(RUN, agent=PARALLEL)
    bad.close_clients()
    assert type(info.value) is error and words in str(info.value)
    assert faulty.served == 1  # asked once: none of these is worth asking again at once
    assert cloud.counts(RUN) == {"servers": 0, "databases": 0, "dns_records": 0}
    stopped_resumably(conn, error)
    finishes_afterwards(conn, cloud, model)


@pytest.mark.parametrize("status", [500, 502, 503, 408, 429])
def test_a_transient_refusal_is_asked_again_after_growing_waits(
    status: int, conn: db.Connection, cloud: Cloud
) -> None:
    model = Model()
    faulty = Faulty(answer(status, {"error": "busy"}), model_transport(model), times=2)
    sleeps: list[float] = []
    w = worker(conn, cloud, faulty, sleeps, retry_backoff=0.2)
    try:
        outcome = w.run(RUN, agent=PARALLEL)
    finally:
        w.close_clients()
    assert faulty.served == 2 and outcome.llm_calls == 3
    assert sleeps[:2] == sorted(sleeps[:2]) and 0 < sleeps[0] < sleeps[1]  # backoff grows
    assert model.calls(RUN) == 3  # the refused attempts never reached the model


@pytest.mark.usefixtures("frozen_clock")
def test_a_model_that_keeps_failing_stops_the_run_resumably_after_the_retries(
    conn: db.Connection, cloud: Cloud
) -> None:
    model = Model()
    faulty = Faulty(answer(503, {"error": "overloaded"}), model_transport(model), times=99)
    sleeps: list[float] = []
    w = worker(conn, cloud, faulty, sleeps)
    with pytest.raises(ModelUnavailable, match=r"after 4 attempt\(s\).*HTTP 503 overloaded"):
        w.run(RUN, agent=PARALLEL)
    w.close_clients()
    assert faulty.served == RETRIES + 1
    assert len(sleeps) == RETRIES and sleeps == sorted(sleeps)
    stopped_resumably(conn, ModelUnavailable)
    finishes_afterwards(conn, cloud, model)


@pytest.mark.usefixtures("frozen_clock")
def test_a_model_that_never_answers_in_time_is_retried_then_stops_the_run_resumably(
    conn: db.Connection, cloud: Cloud
) -> None:
    model = Model()
    model.set_faults(latency=5.0)  # past the read timeout: the transport times out at once
    wire = Recording(model_transport(model))
    sleeps: list[float] = []
    w = worker(conn, cloud, wire, sleeps, model_timeout=0.5)
    with pytest.raises(ModelUnavailable, match="no answer in time"):
        w.run(RUN, agent=PARALLEL)
    w.close_clients()
    assert len(wire.exchanges) == RETRIES + 1 and all(e.status is None for e in wire.exchanges)
    assert len(sleeps) == RETRIES
    stopped_resumably(conn, ModelUnavailable)
    model.set_faults(latency=0.0)
    finishes_afterwards(conn, cloud, model)


def test_a_compressed_answer_is_read_like_any_other(conn: db.Connection, cloud: Cloud) -> None:
    model = Model()
    inner = model_transport(model)

    def gzipped(request: httpx.Request) -> httpx.Response:
        plain = inner.handle_request(request)
        body = gzip.compress(plain.read())
        return httpx.Response(plain.status_code, content=body, headers={"content-encoding": "gzip"})

    w = worker(conn, cloud, httpx.MockTransport(gzipped))
    try:
        assert w.run(RUN, agent=PARALLEL).llm_calls == 3
    finally:
        w.close_clients()


@pytest.mark.parametrize("case", list(FED_BACK))
def test_a_refused_call_is_journaled_with_its_answer_and_its_error_shown_to_the_model(
    case: str, conn: db.Connection, cloud: Cloud
) -> None:
    handler, error, words, index = FED_BACK[case]
    model = Model()
    wire = Recording(Faulty(handler, model_transport(model), times=1))
    w = worker(conn, cloud, wire)
    try:
        outcome = w.run(RUN, agent=PARALLEL)
    finally:
        w.close_clients()
    assert outcome.status == "done" and outcome.llm_calls == model.calls(RUN) + 1  # all paid
    assert cloud.counts(RUN) == {"servers": 1, "databases": 1, "dns_records": 1}
    refused = conn.execute(
        "SELECT d.seq, d.llm_call, t.state, t.remote_status, t.result, t.sends"
        " FROM decisions d JOIN tool_calls t USING (run_id, seq)"
        " WHERE d.run_id = %s AND t.remote_status = 'rejected'",
        (RUN,),
    ).fetchall()
    assert len(refused) == 1 and refused[0]["seq"] == index and refused[0]["llm_call"] == 1
    assert (refused[0]["state"], refused[0]["sends"]) == ("failed", 0)
    shown = refused[0]["result"]
    assert shown["error"] == error.__name__ and words in shown["message"]
    # the next question answers the refused call by its id, with that error, once
    second = wire.exchanges[1].json()["messages"]
    answers = [m for m in second if m["role"] == "tool" and m["tool_call_id"] == f"call_{index}"]
    assert len(answers) == 1 and json.loads(answers[0]["content"]) == shown


def test_a_model_that_keeps_naming_an_unknown_tool_fails_the_run_after_the_limit(
    conn: db.Connection, cloud: Cloud
) -> None:
    model = Model()
    faulty = Faulty(answer(200, calling(("drop_database", "{}"))), model_transport(model), 99)
    w = worker(conn, cloud, faulty, max_bad_answers=2)
    with pytest.raises(TooManyBadAnswers, match="gave 3 answers naming an unknown tool") as info:
        w.run(RUN, agent=PARALLEL)
    w.close_clients()
    assert "(MAX_BAD_ANSWERS); the last: the model chose tool 'drop_database'" in str(info.value)
    assert faulty.served == 3  # two shown back, the third fails the run: none asked again
    run = conn.execute("SELECT status, llm_calls, failure FROM runs WHERE id = %s", (RUN,))
    row = run.fetchone()
    assert row is not None and (row["status"], row["llm_calls"]) == ("failed", 3)
    assert row["failure"].startswith("TooManyBadAnswers: ")
    assert journaled(conn) == {"model_answers": 3, "decisions": 3, "tool_calls": 3}
