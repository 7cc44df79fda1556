"""A long value cannot make a log line unreadable: the line cuts it, the journal keeps it.

A model that decides a 5 MB argument is journaled whole, while every ``decided`` and
``replayed`` line of the run carries its first ``VALUE_LIMIT`` characters and a marker
with its whole length (``agent_runtime.logfmt``).
"""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from agent_runtime import Agent, Call, tool
from agent_runtime.config import Settings
from agent_runtime.crash import CrashPlan, InjectedCrash, raise_crash
from agent_runtime.logfmt import VALUE_LIMIT, LineFormatter, cut
from agent_runtime.loop.worker import Worker
from agent_runtime.store import db
from agent_runtime.store.journal import Journal
from agent_runtime.store.journalable import MAX_STRING

from .fix_runtime import reset_journal

RUN = "long-arg"
# The largest argument a model's answer may carry (journalable.MAX_STRING characters in its
# arguments string; past it the answer is a MalformedAnswer): 1,000 times the log's limit.
BIG = "x" * (MAX_STRING - len(json.dumps({"text": ""})))
ARGS = json.dumps({"text": BIG})
assert len(ARGS) == MAX_STRING


@tool(effect="read")
def note(call: Call, text: str) -> Any:
    """Take a note."""
    return {"length": len(text)}


AGENT = Agent(name="noter", tools=[note], instructions="Take the note.", model="m")


def _model(request: httpx.Request) -> httpx.Response:
    """The first question gets the big call; the next one the final answer."""
    asked = json.loads(request.content)
    answered = any(m["role"] == "tool" for m in asked["messages"])
    if answered:
        message: dict[str, Any] = {"role": "assistant", "content": "noted"}
    else:
        call = {"id": "c1", "type": "function", "function": {"name": "note", "arguments": ARGS}}
        message = {"role": "assistant", "content": None, "tool_calls": [call]}
    finish = "stop" if answered else "tool_calls"
    return httpx.Response(
        200, json={"choices": [{"index": 0, "message": message, "finish_reason": finish}]}
    )


@pytest.fixture
def lines() -> Iterator[io.StringIO]:
    """What the CLI's formatter writes for the runtime's records, line by line."""
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(LineFormatter())
    logger = logging.getLogger("agent_runtime")
    logger.addHandler(handler)
    level = logger.level
    logger.setLevel(logging.INFO)
    yield out
    logger.removeHandler(handler)
    logger.setLevel(level)


def _worker(conn: db.Connection, crash: CrashPlan | None = None) -> Worker:
    return Worker.build(
        Journal(conn),
        Settings(model_url="http://model/v1"),
        agents=AGENT,
        transports={"model": httpx.MockTransport(_model)},
        crash=crash or CrashPlan(),
        sleep=lambda seconds: None,
    )


def test_the_largest_argument_an_answer_may_carry_is_cut_on_its_log_lines_and_kept_whole(
    conn: db.Connection, lines: io.StringIO
) -> None:
    reset_journal(conn)
    first = _worker(conn, CrashPlan(point="after_decide", seq=0, action=raise_crash))
    with pytest.raises(InjectedCrash):
        first.run(RUN, agent=AGENT)
    first.close_clients()
    restart = _worker(conn)
    try:
        outcome = restart.run(RUN, takeover=True)
    finally:
        restart.close_clients()
    assert outcome.output == "noted"
    logged = lines.getvalue().splitlines()
    events = {line.split()[1]: line for line in logged if f"run={RUN} seq=0 " in line}
    marker = f"…[cut {len(ARGS)} chars]"
    for event in ("decided", "replayed"):
        line = events[event]
        assert len(line) < VALUE_LIMIT + 200, (event, len(line))
        assert f"args={ARGS[:VALUE_LIMIT]}{marker} " in line
    assert max(len(line) for line in logged) < VALUE_LIMIT + 400
    row = conn.execute(
        "SELECT args FROM decisions WHERE run_id = %s AND seq = 0", (RUN,)
    ).fetchone()
    assert row is not None and row["args"] == {"text": BIG}  # the journal keeps it whole
    result = conn.execute(
        "SELECT result FROM tool_calls WHERE run_id = %s AND seq = 0", (RUN,)
    ).fetchone()
    assert result is not None and result["result"] == {"length": len(BIG)}


def test_a_value_at_the_limit_is_kept_and_one_past_it_is_cut_with_its_length() -> None:
    assert cut("y" * VALUE_LIMIT) == "y" * VALUE_LIMIT
    assert cut("y" * (VALUE_LIMIT + 1)) == "y" * VALUE_LIMIT + f"…[cut {VALUE_LIMIT + 1} chars]"


def test_every_argument_of_a_record_is_cut_and_numbers_stay_numbers() -> None:
    long_list = list(range(2000))
    record = logging.LogRecord(
        "agent_runtime", logging.WARNING, __file__, 1,
        "event run=%s n=%d error=%r items=%s", ("r" * 3000, 7, "e" * 3000, long_list), None,
    )  # fmt: skip
    line = LineFormatter().format(record)
    assert line.startswith("WARNING event run=" + "r" * VALUE_LIMIT + "…[cut 3000 chars] n=7 ")
    assert "error='" + "e" * VALUE_LIMIT + "…[cut 3000 chars]' " in line
    assert f"…[cut {len(str(long_list))} chars]" in line
    assert len(line) < 4 * VALUE_LIMIT
    assert record.args is not None and record.args[0] == "r" * 3000  # the record is untouched
