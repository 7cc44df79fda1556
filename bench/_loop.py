"""A bench-only agent whose runs take as many tool steps as asked, and its in-process model.

The mock model's plans stop after three tools; a benchmark of long runs needs a plan of
any length. This is the smallest one, made with the runtime's public Agent and tool API
and the Chat Completions wire format, so the runtime takes the path a real agent takes:

- the run's input says how many steps it takes (``Call tick 50 times, then answer.``);
- :class:`LoopModel`, an httpx transport, reads the task and counts the tool results in
  the conversation it is sent, and answers the next ``tick`` call, or the final text. It
  decides from the conversation alone, so a resumed run gets the right answer too; it
  does not decode the request (a byte search), so its own cost stays flat as runs grow;
- ``tick`` is ``keyed`` and goes to the mock cloud over its in-process transport (a DNS
  record under the call's idempotency key), or with ``remote=False`` is a ``read`` tool
  that calls nothing.

Both transports count the seconds spent inside them (:class:`Timed`), so a benchmark
can say how much of a step was the mocks'.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any, Final

import httpx

from agent_runtime import Journal, Outcome, Settings, Worker
from agent_runtime.store import db
from agent_runtime.tools.agent import Agent, Wiring
from agent_runtime.tools.tooldef import Call, Result, Tool, tool
from mock_remotes import Cloud, cloud_transport

MODEL: Final = "bench-loop"
TASK: Final = "Call tick {steps} times, then answer."
_TASK_STEPS: Final = re.compile(rb"Call tick (\d+) times")
_TOOL_RESULT: Final = b'"tool_call_id"'  # a key only tool-result messages carry


def task(steps: int) -> str:
    """The input of a run that takes ``steps`` tool steps."""
    return TASK.format(steps=steps)


class Timed(httpx.BaseTransport):
    """A transport that counts the seconds spent inside the one it wraps."""

    def __init__(self, inner: httpx.BaseTransport) -> None:
        self.inner = inner
        self.seconds = 0.0

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        start = time.perf_counter()
        try:
            return self.inner.handle_request(request)
        finally:
            self.seconds += time.perf_counter() - start

    def close(self) -> None:
        self.inner.close()


class LoopModel(httpx.BaseTransport):
    """Chat Completions in-process: ``tick`` until the task's count of results, then text.

    ``asked`` holds the wall and CPU clocks (``perf_counter``, ``process_time``) at every
    request, in order: a step's cost is the time between the question that started it and
    the next one.
    """

    def __init__(self) -> None:
        self.asked: list[tuple[float, float]] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.asked.append((time.perf_counter(), time.process_time()))
        if request.method != "POST" or not request.url.path.endswith("/chat/completions"):
            return httpx.Response(404, json={"error": "not_found"}, request=request)
        body = request.read()
        wanted = _TASK_STEPS.search(body)
        if wanted is None:
            return httpx.Response(
                400,
                json={"error": "bad_task", "detail": f"the input must say {TASK!r}"},
                request=request,
            )
        done = body.count(_TOOL_RESULT)
        return httpx.Response(200, json=_completion(done, int(wanted.group(1))), request=request)


USAGE: Final = {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}


def answer(done: int, steps: int) -> dict[str, Any]:
    """The assistant message for a conversation with ``done`` tool results of ``steps``."""
    if done < steps:
        return {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": f"call_{done}",
                    "type": "function",
                    "function": {"name": "tick", "arguments": json.dumps({"n": done})},
                }
            ],
        }
    return {"role": "assistant", "content": f"ticked {done} times"}


def _completion(done: int, steps: int) -> dict[str, Any]:
    return {
        "id": f"bench-{done}",
        "object": "chat.completion",
        "created": 0,
        "model": MODEL,
        "choices": [
            {
                "index": 0,
                "message": answer(done, steps),
                "finish_reason": "tool_calls" if done < steps else "stop",
            }
        ],
        "usage": USAGE,
    }


def _remote_tick(wiring: Wiring) -> list[Tool]:
    cloud = wiring.transports.get("cloud")
    if cloud is None:
        raise ValueError("the keyed tick needs the cloud's in-process transport ('cloud')")
    client = httpx.Client(base_url=wiring.settings.cloud_url, transport=cloud)
    wiring.closing(client.close)

    @tool(effect="keyed", retry_on=())
    def tick(call: Call, n: int) -> Result:
        """Record tick n (a DNS record in the mock cloud, under the call's key)."""
        record = {"name": f"tick-{n}.bench.test", "type": "A", "value": "10.0.0.1"}
        answer = client.post("/v1/dns_records", json=record, headers=call.headers())
        answer.raise_for_status()
        body: dict[str, Any] = answer.json()
        status = str(body.pop("status"))
        return Result(body, status=status)

    return [tick]


def _local_tick(wiring: Wiring) -> list[Tool]:
    @tool(effect="read")
    def tick(call: Call, n: int) -> dict[str, int]:
        """Read tick n (calls nothing)."""
        return {"n": n}

    return [tick]


def loop_agent(*, remote: bool = True) -> Agent:
    """The agent: ``tick`` (keyed, via the mock cloud; ``remote=False``: a local read)."""
    return Agent(
        name="bench-loop",
        instructions="Call tick as often as the task says, then answer.",
        tools=_remote_tick if remote else _local_tick,
        model=MODEL,
        protocol="chat",
    )


class LoopRuns:
    """A worker of the loop agent on a connection of its own, with the in-process mocks
    (no heartbeat thread: a lease renewal every few seconds is no part of a step)."""

    def __init__(self, url: str, state: Path, *, remote: bool = True) -> None:
        self.conn = db.connect(url, application_name="bench.worker")
        db.ensure_schema(self.conn)
        # the mock's own durability is not measured (a process crash still keeps it)
        self.cloud = Cloud(state / "cloud.sqlite3", synchronous="OFF")
        self.model = LoopModel()
        self.model_side = Timed(self.model)
        self.cloud_side = Timed(cloud_transport(self.cloud))
        self.agent = loop_agent(remote=remote)
        self.worker = Worker.build(
            Journal(self.conn),
            Settings(database_url=url),
            agents=self.agent,
            transports={"model": self.model_side, "cloud": self.cloud_side},
        )

    @property
    def mock_seconds(self) -> float:
        """Seconds spent inside the mocks so far."""
        return self.model_side.seconds + self.cloud_side.seconds

    def run(self, run_id: str, steps: int) -> Outcome:
        """A new run of ``steps`` tool steps, driven to done."""
        outcome = self.worker.run(run_id, agent=self.agent, input=task(steps))
        if outcome.steps != steps:
            raise SystemExit(f"run {run_id} took {outcome.steps} steps, not {steps}")
        return outcome

    def close(self) -> None:
        self.worker.close()  # its clients, then the connection
        self.cloud.close()
