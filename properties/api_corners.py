"""The worker's public API as a user calls it, defaults and all (the ``api`` check): what
no schedule does, since the runners build their workers themselves and pass every argument.

- ``Worker.open`` (the command line's and a pool worker's way in) makes a worker whose
  ``run(id)``, given nothing else, creates the run and drives it to done with its one agent;
- a worker with two agents, or none, refuses a new run that names none
  (``UnknownAgentChoice``), before anything is written;
- ``claim(id)`` and ``run(id)`` of a run a live worker of this process holds are refused
  (``RunUnavailable``): nobody takes a live lease over unless asked (``takeover``);
- ``close()`` closes what the worker opened: its model client and its tools' clients;
- a run at generation :data:`AGED` logs ``replayed`` for none of its own worker's
  decisions (the second call of one answer is this generation's, not an earlier one's).

The mutation command runs it before the small scope (:mod:`properties.mutation.check`),
CI in ``properties/test_api_corners.py``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from typing import Final

import httpx

from agent_runtime import Agent, Worker
from agent_runtime.errors import RunUnavailable
from agent_runtime.loop.outcome import UnknownAgentChoice

from . import sqlfile
from .agents import suite_agents
from .logged import WorkerLines
from .runners import InProcessRunner

RUNS: Final = ("api-made", "api-two", "api-none", "api-held", "api-aged")
# A run claimed this many times already: generations past the small ints the interpreter
# shares, so that an identity test of two equal generations is caught (the pool corners'
# runs start there too)
AGED: Final = 1000


class Closing(httpx.BaseTransport):
    """A remote's transport that says whether a client closed it (the suite's own stays
    open: other workers share it)."""

    def __init__(self, inner: httpx.BaseTransport) -> None:
        self.inner = inner
        self.closed = False

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        return self.inner.handle_request(request)

    def close(self) -> None:
        self.closed = True


def check_api(runner: InProcessRunner) -> list[str]:
    """What of the list above does not hold, on ``runner``'s database and remotes (emptied
    first and after)."""
    runner.reset()
    agents = suite_agents(runner.remotes.support_url)
    model = Closing(runner.transports["model"])
    cloud = Closing(runner.transports["cloud"])

    def opened(mine: Sequence[Agent]) -> Worker:
        return Worker.open(
            runner.base_settings,
            runner.url,
            agents=mine,
            model_transport=model,
            cloud_transport=cloud,
        )

    problems: list[str] = []
    try:
        one = opened([agents["provisioning"]])
        try:
            done = one.run(RUNS[0])
            if done.status != "done":
                problems.append(f"run({RUNS[0]!r}) with its defaults ended {done.status}")
            held = one.journal.require_run(RUNS[0])
            if held.agent != agents["provisioning"].name:
                problems.append(f"run({RUNS[0]!r}) made a run of agent {held.agent!r}")
        finally:
            one.close()
        if not (model.closed and cloud.closed):
            problems.append(
                f"close() left open its model client ({not model.closed}) or its tools' "
                f"({not cloud.closed})"
            )
        for run, mine in ((RUNS[1], [agents["provisioning"], agents["parallel"]]), (RUNS[2], [])):
            problems += _refused(opened(mine), partial(_run_new, run), UnknownAgentChoice)
            if _exists(runner, run):
                problems.append(f"a refused run({run!r}) was created all the same")
        problems += _aged(runner, opened([agents["parallel"]]), agents["parallel"].name)
        holder = opened([agents["provisioning"]])
        try:
            holder.journal.create_run(RUNS[3], agents["provisioning"].name, None)
            if holder.claim(RUNS[3]) is None:
                problems.append(f"claim({RUNS[3]!r}) of a new run took nothing")
            for call in (_claim_held, _run_held):
                problems += _refused(opened([agents["provisioning"]]), call, RunUnavailable)
        finally:
            holder.close()
    finally:
        runner.reset()
    return problems


def _aged(runner: InProcessRunner, worker: Worker, agent: str) -> list[str]:
    lines = WorkerLines().install()
    try:
        worker.journal.create_run(RUNS[4], agent, None)
        sqlfile.rows(runner.conn, "age_run", {"run": RUNS[4], "generation": AGED})
        worker.run(RUNS[4], create=False)
    finally:
        lines.remove()
        worker.close()
    mine = [line for line in lines.lines if line.startswith(f"replayed run={RUNS[4]} ")]
    return [f"a run past generation {AGED} replayed its own decisions: {mine}"] if mine else []


def _run_new(run: str, worker: Worker) -> object:
    return worker.run(run)


def _claim_held(worker: Worker) -> object:
    return worker.claim(RUNS[3])


def _run_held(worker: Worker) -> object:
    return worker.run(RUNS[3], create=False)


def _refused(worker: Worker, call: Callable[[Worker], object], error: type[Exception]) -> list[str]:
    try:
        got = call(worker)
    except error:
        return []
    except Exception as exc:  # the wrong refusal is a finding too
        return [f"expected {error.__name__}, the worker raised {type(exc).__name__}: {exc}"]
    finally:
        worker.close()
    return [f"expected {error.__name__}, the worker went on and returned {got!r}"]


def _exists(runner: InProcessRunner, run: str) -> bool:
    return sqlfile.one(runner.conn, "lease_of", {"run": run}) is not None
