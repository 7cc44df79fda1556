"""Run an agent on the runtime under ``crashresume.conform``: its tool calls are the effects.

::

    from crashresume import conform
    from agent_runtime.conformance import RuntimeSubject

    report = conform(
        lambda ctx: RuntimeSubject(
            ctx, url, agent=support, transports={"model": ..., "support": ...}
        ),
        inputs=["a", "b"],
    )

Each input is one agent run (``<ctx.run_id>/<input>``, so scenarios never share a run).
Every tool the agent makes is wrapped so that a call goes through ``ctx.effect`` the way
its effect contract says the remote behaves; the harness crashes the subject right before
or right after an effect, restarts it (a new worker, the old owner fenced) and judges:

========  ==========================================================================
effect    how its call is recorded
========  ==========================================================================
keyed     ``ctx.effect(tool, args, key=<run>:<seq>)``: a repeat of the key is answered
          from the harness's record as ``already_done``, as the idempotent remote
          answers, without calling the tool again
checked   ``ctx.effect(tool, args)``, no key: every send is a new effect, so a restart
          that sends again is a ``duplicate_effect``; the check asks the real remote and
          is not an effect
once      ``ctx.effect(tool, args)``, no key; a restart parks the run, and ``step``
          raises :class:`~agent_runtime.errors.NeedsAttention` (a ``resume_crashed``)
          unless ``operator`` resolves the call, as a person would
read      not an effect: called as it is
========  ==========================================================================

A fault the harness injects at an effect (``conform(..., faults=[...])``: a timeout after
the remote acted, a failure before it acted, a late landing) reaches the tool as the error
its client meets: a tool with ``retry_on`` handles it by its contract (a checked tool
checks, a once tool parks); a tool without one (the cloud's keyed tools, whose client
retries under the same key itself) stops the run resumably with ``RemoteUnavailable``, as
its client does after its last attempt, and the harness's restart resumes it at once
(the restart stands for the supervisor's resume after the backoff, which it ends as
``retry`` does). A checked tool's timeout is the worker's own answer to a call that may
still act (:class:`~agent_runtime.errors.CallInFlight`): this adapter's in-flight bound is
0, so the run is released and the next start checks, never early.

``args`` is the call's arguments as canonical JSON. ``state()`` is every run's confirmed
tools and arguments. Without ``agent`` the subject is the seed's provisioning agent, with
``cloud`` and ``model`` as its in-process remotes (the original signature).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import httpx

from agent_runtime.loop.worker import Worker
from agent_runtime.store import db
from agent_runtime.store.journal import Journal
from agent_runtime.tools.agent import Agent, Wiring
from agent_runtime.tools.tooldef import Call, Result, Tool

from .config import Settings
from .errors import BackingOff, CallInFlight, NeedsAttention, RemoteUnavailable

# Called with the subject and the parked run's id: resolve its call in doubt (for example
# with agent_runtime.operator.actions.resolve_call on subject.conn), or raise.
Operator = Callable[["RuntimeSubject", str], None]
MAX_PARKS = 10  # resolutions in a row before a step gives up on its operator


def canonical(args: Mapping[str, Any]) -> str:
    """A call's arguments as one comparable string (the effect's ``arg``)."""
    return json.dumps(args, sort_keys=True, separators=(",", ":"))


def effect_tool(ctx: Any, tool: Tool) -> Tool:
    """``tool``, its calls recorded through ``ctx.effect`` by its contract (see above)."""
    if tool.effect == "read":
        return tool

    def call(context: Call, **args: Any) -> Result:
        performed: list[Result] = []

        def perform() -> tuple[Any, str]:
            answer = tool(context, args)
            performed.append(answer)
            return answer.value, answer.status

        key = context.key if tool.effect == "keyed" else None
        try:
            value, status = ctx.effect(tool.name, canonical(args), key=key, perform=perform)
        except (TimeoutError, ConnectionError) as exc:  # a fault the harness injected
            if tool.effect == "checked" and isinstance(exc, TimeoutError):
                # The request may still land (a `slow` fault lands when this start ends),
                # and this adapter's in-flight bound is 0: a check now could come before
                # it. What the worker does for a call that may still act: release the run,
                # to be checked by the next start, never early.
                raise CallInFlight(
                    f"{tool.name} timed out and may still act: {exc}", retry_after=0.0
                ) from exc
            if tool.retry_on:  # the tool's own contract decides (checked checks, once parks)
                raise
            # A tool with no retry_on has a client that retries these itself under the same
            # key, then gives up resumably: what it would say after its last attempt.
            raise RemoteUnavailable(
                f"{tool.name} did not get through for key={key}: {type(exc).__name__}: {exc}"
            ) from exc
        return Result(value, status if performed else "already_done")

    # The harness's effect has acted when ctx.effect returns, and a crash is a clean death
    # between two effects: no request of a dead life is still in flight, so a check never
    # has anything to wait out (in_flight 0, instead of the worker's tool timeout).
    return dataclasses.replace(tool, fn=call, in_flight=0.0)


def effect_agent(ctx: Any, agent: Agent) -> Agent:
    """``agent`` with every tool recorded through ``ctx.effect`` (same name: its runs)."""

    def tools(wiring: Wiring) -> Sequence[Tool]:
        return [effect_tool(ctx, t) for t in agent.make_tools(wiring).values()]

    return dataclasses.replace(agent, tools=tools)


class RuntimeSubject:
    """A conform subject: ``step(input)`` drives one agent run to done."""

    def __init__(
        self,
        ctx: Any,
        url: str,
        cloud: httpx.BaseTransport | None = None,
        model: httpx.BaseTransport | None = None,
        *,
        agent: Agent | None = None,
        transports: Mapping[str, httpx.BaseTransport] | None = None,
        settings: Settings | None = None,
        task: Callable[[str], str | None] | None = None,
        operator: Operator | None = None,
        worker_class: type[Worker] = Worker,
    ) -> None:
        """``transports``: the agent's in-process remotes by name (``model`` and the ones
        its tool factory reads; ``cloud``/``model`` add to them). ``task``: the input of the
        run of each job (default: the agent's own). ``operator``: what to do when a run
        parks (default: let ``NeedsAttention`` end the step)."""
        if agent is None:
            from agent_runtime.tools.provisioning import agent as provisioning

            agent = provisioning
        wired = dict(transports or {})
        if cloud is not None:
            wired["cloud"] = cloud
        if model is not None:
            wired["model"] = model
        self.ctx = ctx
        self.agent = effect_agent(ctx, agent)
        self.task = task
        self.operator = operator
        conn = db.connect(url)
        try:
            db.ensure_schema(conn)
        except BaseException:
            conn.close()
            raise
        self.worker = worker_class.build(
            Journal(conn),
            settings or Settings(database_url=url, retry_backoff=0.0),
            agents=self.agent,
            transports=wired,
            sleep=lambda seconds: None,
        )

    @property
    def conn(self) -> db.Connection:
        return self.worker.journal.conn

    def run_id(self, job: str) -> str:
        return f"{self.ctx.run_id}/{job}"

    def step(self, job: str) -> None:
        run_id = self.run_id(job)
        task = self.task(job) if self.task is not None else None
        for _ in range(MAX_PARKS):
            try:
                # A restart is a new process in spirit: the previous owner is dead for certain.
                self.worker.run(run_id, agent=self.agent, input=task, takeover=True)
                return
            except BackingOff:
                # A start that stopped resumably (a fault its tool could not get past) left
                # the run waiting out a backoff; the harness's restart stands for the
                # supervisor's resume once it is over: end the wait, as `retry` does.
                from agent_runtime.operator.actions import retry_run

                retry_run(self.conn, run_id)
            except NeedsAttention:
                if self.operator is None:
                    raise
                self.operator(self, run_id)
        raise NeedsAttention(f"run {run_id} parked {MAX_PARKS} times in a row; giving up")

    def state(self) -> dict[str, list[tuple[str, str]]]:
        rows = db.run(self.conn, "confirmed_steps_under", {"prefix": f"{self.ctx.run_id}/"})
        state: dict[str, list[tuple[str, str]]] = {}
        for row in rows:
            job = row["run_id"].split("/", 1)[1]
            state.setdefault(job, []).append((row["tool"], json.dumps(row["args"], sort_keys=True)))
        return state

    def close(self) -> None:
        self.worker.close()
