"""A step's corners as a user's agents meet them (the ``api`` check's second part): what
no schedule does, since the suite's agents never change between a crash and the restart,
never fail for certain with a long message, and never rebuild a conversation without the
answers the journal keeps.

- a ``read`` call is made without asking the database who owns the run (it has no effect
  a fenced worker could repeat; every other contract is asked before each attempt);
- a tool that fails for certain leaves the model its error's first :data:`CUT` characters
  of a longer message, exactly;
- a decision read back from the journal is checked again and handed to its tool as the
  types its hints name (an enum member, not its JSON value), and a decision whose
  arguments no longer fit the agent's tool fails the run (``UnusableDecision``), saying so;
- a restart in the middle of an answer of two calls, past answer :data:`AGED` (numbers the
  interpreter does not share), answers each call once in the conversation it rebuilds;
- a run whose decisions have no answer kept (a run begun before schema 4, whose answers
  migration 0004 could not know) still has its history and a conversation the model
  accepts, its assistant messages made from the decisions alone;
- the ``intent`` span of an operator's redo says ``redo``.

Each story crashes a worker of this process at a named point (``InjectedCrash``) and lets
a fresh worker take the run over, as a restarted process would. The mutation command runs
it after :mod:`properties.api_corners`; CI in ``properties/test_api_steps.py``, with each
slip it was written for planted as the driver writes it.
"""

from __future__ import annotations

import enum
import functools
from collections.abc import Callable, Sequence
from typing import Any, Final

import httpx
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from agent_runtime import Agent, Call, Result, Tool, Wiring, tool
from agent_runtime.crash import CrashPlan, InjectedCrash, raise_crash
from agent_runtime.errors import AgentRuntimeError
from agent_runtime.loop.worker import Worker
from agent_runtime.observe import tracing
from agent_runtime.operator.actions import resolve_call
from agent_runtime.store import db
from agent_runtime.store.journal import Journal

from . import sqlfile
from .agents import SUPPORT_INPUT, desk_tools, suite_agents
from .api_corners import AGED
from .runners import InProcessRunner

CUT: Final = 500  # characters of a certain failure's message the model is shown
LONG: Final = CUT + 100  # the message a failing tool raises here


class Known(enum.Enum):
    """The order the support model asks about, as a stricter tool types it."""

    ORDER = "A-1001"


class Other(enum.Enum):
    """Orders that are not that one: the journaled decision no longer fits."""

    ORDER = "B-2002"


class _Failing(httpx.BaseTransport):
    """The desk's transport, but the first lookup of an order raises a bug of the client
    with a long message (nothing the tool retries: the call failed for certain; the model,
    told so, asks again)."""

    def __init__(self, inner: httpx.BaseTransport) -> None:
        self.inner = inner
        self.failed = False

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        if request.url.path.startswith("/v1/orders/") and not self.failed:
            self.failed = True
            raise ValueError("x" * LONG)
        return self.inner.handle_request(request)


def check_steps(runner: InProcessRunner) -> list[str]:
    """What of the list above does not hold, on ``runner``'s database and remotes."""
    stories: Sequence[Callable[[InProcessRunner], list[str]]] = (
        _reads_unasked,
        _long_failure,
        functools.partial(_retyped, order=Known),
        functools.partial(_retyped, order=Other),
        _aged_answer,
        _answers_missing,
        _redo_span,
    )
    return run_stories(runner, stories)


def run_stories(
    runner: InProcessRunner, stories: Sequence[Callable[[InProcessRunner], list[str]]]
) -> list[str]:
    """Each story on a clean slate (the runner reset before and after): what went wrong."""
    problems: list[str] = []
    for story in stories:
        runner.reset()
        try:
            problems += story(runner)
        finally:
            runner.reset()
    return problems


def worker_for(
    runner: InProcessRunner,
    agent: Agent,
    *,
    crash: CrashPlan | None = None,
    transports: dict[str, httpx.BaseTransport] | None = None,
) -> Worker:
    """A worker of ``agent`` on a connection of its own to ``runner``'s database and its
    remotes (or ``transports``), dying at ``crash``; beaten by nobody (a run is short)."""
    return Worker.build(
        Journal(db.connect(runner.url)),
        runner.base_settings,
        agents=[agent],
        transports=transports or runner.transports,
        crash=crash,
        heartbeat_connect=functools.partial(db.connect, runner.url),  # no heartbeat thread
    )


def crash_run(
    runner: InProcessRunner, agent: Agent, run: str, point: str, seq: int, *, create: bool = True
) -> bool:
    """Start ``run`` (made here unless not ``create``) and crash its worker at ``point`` of
    step ``seq``: whether it did."""
    worker = worker_for(runner, agent, crash=CrashPlan(point=point, seq=seq, action=raise_crash))
    try:
        worker.run(run, create=create)
    except InjectedCrash:
        return True
    finally:
        worker.close()
    return False


def resume_run(runner: InProcessRunner, agent: Agent, run: str) -> str:
    """A fresh worker takes ``run`` over and drives it: its status, or the error it raised."""
    worker = worker_for(runner, agent)
    try:
        return worker.run(run, create=False, takeover=True).status
    except AgentRuntimeError as exc:
        return f"{type(exc).__name__}: {exc}"
    finally:
        worker.close()


def _reads_unasked(runner: InProcessRunner) -> list[str]:
    asked: list[str] = []
    worker = worker_for(runner, suite_agents(runner.remotes.support_url)["support"])
    journal = worker.journal
    real = journal.check_owner

    def check_owner(lease: Any, what: str) -> None:
        asked.append(what)
        real(lease, what)

    journal.check_owner = check_owner  # type: ignore[method-assign]
    try:
        status = worker.run("steps-read").status
    finally:
        worker.close()
    reads = [what for what in asked if what.startswith("read ")]
    if status != "done" or not asked:
        return [f"a support run ended {status} after owner checks {asked}"]
    return [f"a read call asked who owns the run: {reads}"] if reads else []


def _long_failure(runner: InProcessRunner) -> list[str]:
    transports = {**runner.transports, "support": _Failing(runner.transports["support"])}
    worker = worker_for(
        runner, suite_agents(runner.remotes.support_url)["support"], transports=transports
    )
    try:
        worker.run("steps-long")
        call = worker.journal.history("steps-long").calls.get(0)
    except AgentRuntimeError as exc:
        return [f"a run whose lookup failed for certain stopped: {exc}"]
    finally:
        worker.close()
    result = call.result if call is not None else None
    message = result.get("message") if isinstance(result, dict) else None
    if message != "x" * CUT:
        shown = None if message is None else f"{len(message)} characters"
        return [f"a failure of {LONG} characters was kept as {shown}, not its first {CUT}"]
    return []


def _retyped(runner: InProcessRunner, *, order: type[enum.Enum]) -> list[str]:
    """Crash once the lookup is decided; resume with a lookup whose order is an enum."""
    run = f"steps-{order.__name__.lower()}"
    url = runner.remotes.support_url
    if not crash_run(runner, suite_agents(url)["support"], run, "after_decide", 0):
        return [f"{run}: the worker never reached after_decide of step 0"]
    got: list[object] = []
    stricter = Agent(
        name="support",
        tools=functools.partial(_typed_desk, url=url, order=order, got=got),
        instructions="You answer customers about their orders.",
        input=SUPPORT_INPUT,
        model="mock-support",
    )
    ended = resume_run(runner, stricter, run)
    if order is Known:
        if ended != "done" or [type(value) for value in got] != [Known]:
            return [f"a journaled lookup was handed {got!r} (the run ended {ended})"]
        return []
    if not ended.startswith("UnusableDecision") or "cannot be acted on" not in ended:
        return [f"a journaled decision that no longer fits ended the run as {ended!r}"]
    failed = sqlfile.one(runner.conn, "lease_of", {"run": run})
    if failed is None or failed["status"] != "failed":
        return [f"a journaled decision that no longer fits left the run {failed}"]
    return []


def _typed_desk(
    wiring: Wiring, *, url: str, order: type[enum.Enum], got: list[object]
) -> list[Tool]:
    """The desk's tools, the lookup's order typed as ``order`` (what it was handed: ``got``)."""
    lookup, *others = desk_tools(wiring, url=url, email="checked")

    def typed(call: Call, order_id: Any) -> Result:
        got.append(order_id)
        if not isinstance(order_id, enum.Enum):
            raise TypeError(f"order_id came as {type(order_id).__name__}, not {order.__name__}")
        return lookup.invoke(call, {"order_id": order_id.value})

    typed.__annotations__["order_id"] = order  # what the stricter tool's schema says
    stricter = tool(typed, effect="read", name="lookup_order", description="Look an order up.")
    return [stricter, *others]


def _aged_answer(runner: InProcessRunner) -> list[str]:
    """The parallel agent's second answer holds steps 1 and 2; crash once step 1 is
    confirmed, at answer numbers past :data:`AGED`, and resume."""
    run = "steps-aged"
    parallel = suite_agents(runner.remotes.support_url)["parallel"]
    Journal(runner.conn).create_run(run, parallel.name, None)
    sqlfile.rows(runner.conn, "age_run", {"run": run, "generation": AGED})
    sqlfile.rows(runner.conn, "age_answers", {"run": run, "answers": AGED})
    if not crash_run(runner, parallel, run, "after_confirm", 1, create=False):
        return [f"{run}: the worker never reached after_confirm of step 1"]
    ended = resume_run(runner, parallel, run)
    if ended != "done":
        return [f"a run resumed inside an answer past answer {AGED} ended {ended}"]
    return []


def _answers_missing(runner: InProcessRunner) -> list[str]:
    """Crash once the lookup (step 0) is confirmed, forget the run's answers, resume."""
    run = "steps-old"
    support = suite_agents(runner.remotes.support_url)["support"]
    if not crash_run(runner, support, run, "after_confirm", 0):
        return [f"{run}: the worker never reached after_confirm of step 0"]
    if not sqlfile.rows(runner.conn, "forget_answers", {"run": run}):
        return [f"{run}: no decision was journaled before the crash"]
    ended = resume_run(runner, support, run)
    steps = sqlfile.rows(runner.conn, "decided_steps", {"run": run})
    unsettled = [
        (s["seq"], s["tool"], s["state"])
        for s in steps
        if s["tool"] != "done" and s["state"] != "confirmed"
    ]
    if ended != "done" or unsettled or [s["seq"] for s in steps] != list(range(len(steps))):
        return [
            f"a run without its answers kept ended {ended}, its steps "
            f"{[(s['seq'], s['tool'], s['state']) for s in steps]}"
        ]
    return []


def _redo_span(runner: InProcessRunner) -> list[str]:
    """The ``once`` email's intent is journaled, then the worker dies: the run is parked,
    the operator orders a redo, and the next worker's ``intent`` span says so."""
    run = "steps-redo"
    once = suite_agents(runner.remotes.support_url)["once"]
    if not crash_run(runner, once, run, "after_intent", 2):
        return [f"{run}: the worker never reached after_intent of step 2"]
    parked = resume_run(runner, once, run)
    if "once" not in parked:
        return [f"a once call in doubt did not park its run: {parked}"]
    resolve_call(runner.conn, run, 2, "redo", reason="not sent", in_flight_ok=True)
    spans = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    kept, tracing.provider = tracing.provider, provider
    try:
        ended = resume_run(runner, once, run)
    finally:
        tracing.provider = kept
        provider.shutdown()
    intents = [
        dict(s.attributes or {})
        for s in spans.get_finished_spans()
        if s.name == "intent" and (s.attributes or {}).get("agent_runtime.seq") == 2
    ]
    redos = [a.get("agent_runtime.redo") for a in intents]
    if ended != "done" or redos != [True]:
        return [f"a redone call's intent spans said redo={redos} (the run ended {ended})"]
    return []
