"""The durable step loop: decide, journal, intend, call, confirm.

One step, with the crash points where they fall::

    before_decide -> ask model -> after_decide_before_journal -> journal the answer and its
    decisions -> after_decide -> check args -> before_intent -> journal intent
    -> after_intent -> call the tool (key <run>:<seq>) -> after_call -> journal confirm
    -> after_confirm

A model answer may propose several tool calls: they are journaled together (one decision
each, every one with its own step number and key) and carried out one after the other
(:mod:`agent_runtime.tools.acting`); an answer without tool calls is the final one, its text the
run's output. A (re)start reads the run's history back, first resolves every intent that
has no confirm by its tool's effect contract, then replays journaled decisions instead of
asking the model again, and asks the model only for steps never decided.

How a run under a lease stops: a permanent error fails it; any other error, the
runtime's own or one it did not expect (a bug: logged with its traceback, raised as
:class:`UnexpectedError`), releases it with the reason and a backoff
(``settings.run_backoff_rule()``), so it is not claimed again before the wait has passed.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import httpx

from agent_runtime.backoff import Backoff, uniform
from agent_runtime.config import Settings
from agent_runtime.crash import CrashPlan
from agent_runtime.errors import LeaseLost
from agent_runtime.llm.conversation import DONE
from agent_runtime.llm.deciding import Decider
from agent_runtime.llm.models import Model
from agent_runtime.loop.claiming import claim_run
from agent_runtime.loop.lease import Heartbeat, OwnedWait, make_heartbeat, owner_token
from agent_runtime.loop.outcome import Outcome, UnknownAgentChoice, already_done, output_of
from agent_runtime.loop.stopping import holding
from agent_runtime.observe import tracing
from agent_runtime.observe.steps import Step
from agent_runtime.store import db
from agent_runtime.store.journal import Journal
from agent_runtime.store.records import History, Lease, RunTask
from agent_runtime.store.runid import check_run_id
from agent_runtime.tools.acting import Actor
from agent_runtime.tools.agent import Agent, Wiring, agent_of, by_name
from agent_runtime.tools.tooldef import Tool

log = logging.getLogger(__name__)


def _args(args: dict[str, Any]) -> str:
    return json.dumps(args, sort_keys=False)


class Worker:
    """Drives runs of its agents to completion against one database connection."""

    # How a step is decided and how a call is carried out; a subclass may swap either.
    decider_class: type[Decider] = Decider
    actor_class: type[Actor] = Actor

    def __init__(
        self,
        journal: Journal,
        settings: Settings,
        *,
        agents: Agent | Sequence[Agent] | None = None,
        model: Model | None = None,
        transports: Mapping[str, httpx.BaseTransport] | None = None,
        crash: CrashPlan | None = None,
        heartbeat_url: str | None = None,
        owner: str | None = None,
        heartbeat_connect: Callable[[], db.Connection] | None = None,
        sleep: Callable[[float], None] = time.sleep,
        rand: Callable[[], float] = uniform,
    ) -> None:
        """``agents``: the agents whose runs this worker takes (default: the seed's
        provisioning agent). ``model``: one model client for all of them (default: one per
        agent, made from ``settings`` by its protocol). ``transports``: in-process remotes by
        name (``model``, ``cloud``, ...), for tests. ``heartbeat_url``: renew the lease from a
        thread on a connection of its own; ``heartbeat_connect`` instead: a
        :class:`Heartbeat` over connections from there, but no thread (the caller beats it,
        :attr:`heartbeat`); neither: no renewal (a test that moves the clock itself).
        ``sleep`` and ``rand``: how clients and tools wait between attempts, and the jitter
        of every wait (a number in [0, 1))."""
        if agents is None:
            from agent_runtime.tools.provisioning import agent as provisioning

            agents = provisioning
        self.agents = by_name([agents] if isinstance(agents, Agent) else list(agents))
        self.journal = journal
        self.settings = settings
        self._tools: dict[str, dict[str, Tool]] = {}
        self._closers: list[Callable[[], None]] = []
        self.transports = dict(transports or {})
        self.crash = crash if crash is not None else settings.crash
        self.heartbeat_url = heartbeat_url
        self.heartbeat_connect = heartbeat_connect
        self.owner = owner or owner_token()
        self.sleep = sleep
        self.rand = rand
        self.backoff = settings.run_backoff_rule(rand)
        self.decider = self.decider_class(
            journal,
            settings,
            self.crash,
            guard=self._guard,
            tools=self.tools_for,
            model=model,
            transports=self.transports,
            sleep=sleep,
            rand=rand,
        )
        self.actor = self.actor_class(
            journal,
            self.crash,
            guard=self._guard,
            sleep=sleep,
            backoff=lambda base: Backoff(base=base, cap=settings.run_backoff_cap, rand=rand),
            typed_for=self.decider.typed_for,
            in_flight=settings.in_flight,
        )
        self._heartbeat: Heartbeat | None = None
        self._wait = OwnedWait(sleep, journal, self._guard)  # tools' clients wait with it

    @classmethod
    def open(
        cls,
        settings: Settings,
        url: str,
        *,
        agents: Agent | Sequence[Agent] | None = None,
        model_transport: httpx.BaseTransport | None = None,
        cloud_transport: httpx.BaseTransport | None = None,
        heartbeat: bool = True,
        owner: str | None = None,
    ) -> Worker:
        """A worker with its own connection (schema applied if missing) and clients."""
        conn = db.connect(url)
        try:
            db.ensure_schema(conn)
        except BaseException:
            conn.close()
            raise
        return cls.build(
            Journal(conn),
            settings,
            agents=agents,
            model_transport=model_transport,
            cloud_transport=cloud_transport,
            heartbeat_url=url if heartbeat else None,
            owner=owner,
        )

    @classmethod
    def build(
        cls,
        journal: Journal,
        settings: Settings,
        *,
        agents: Agent | Sequence[Agent] | None = None,
        model_transport: httpx.BaseTransport | None = None,
        cloud_transport: httpx.BaseTransport | None = None,
        transports: Mapping[str, httpx.BaseTransport] | None = None,
        sleep: Callable[[float], None] = time.sleep,
        crash: CrashPlan | None = None,
        heartbeat_url: str | None = None,
        owner: str | None = None,
        heartbeat_connect: Callable[[], db.Connection] | None = None,
        rand: Callable[[], float] = uniform,
    ) -> Worker:
        """A worker on a journal you connected; its model and tool clients are made from
        ``settings`` (``model_transport``, ``cloud_transport``: shorthands of
        ``transports``)."""
        wired = dict(transports or {})
        if model_transport is not None:
            wired["model"] = model_transport
        if cloud_transport is not None:
            wired["cloud"] = cloud_transport
        return cls(
            journal,
            settings,
            agents=agents,
            transports=wired,
            crash=crash,
            heartbeat_url=heartbeat_url,
            owner=owner,
            heartbeat_connect=heartbeat_connect,
            sleep=sleep,
            rand=rand,
        )

    @property
    def heartbeat(self) -> Heartbeat | None:
        """The renewal of the lease held right now, if any."""
        return self._heartbeat

    def close(self) -> None:
        """Close the clients and the database connection."""
        self.close_clients()
        self.journal.conn.close()

    def close_clients(self) -> None:
        """Close the model clients and whatever the agents' tools opened; the connection
        stays (its owner may hand it on)."""
        self.decider.close()
        self._tools.clear()  # their clients close now: made again if the worker goes on
        closers, self._closers = self._closers, []
        for close in closers:
            close()

    # -- what an agent needs --------------------------------------------------------------

    def model_for(self, agent: Agent) -> Model:
        """The agent's model client (made once, from the settings and its protocol)."""
        return self.decider.model_for(agent)

    def tools_for(self, agent: Agent) -> dict[str, Tool]:
        """The agent's tools by name, made once for this worker."""
        tools = self._tools.get(agent.name)
        if tools is None:
            wiring = self.wiring()
            tools = self._tools[agent.name] = agent.make_tools(wiring)
        return tools

    def wiring(self) -> Wiring:
        """What this worker gives a tool factory (clients it opens close with the worker)."""
        return Wiring(
            settings=self.settings,
            transports=self.transports,
            sleep=self._wait,
            rand=self.rand,
            closers=self._closers,
        )

    # -- claiming ------------------------------------------------------------------------

    def claim(self, run_id: str, *, takeover: bool = False) -> Lease | None:
        """Take the run, or None if it is already done. Creates nothing.

        A live lease is taken over only when its owner provably died (same host, pid
        gone) or the caller says so (``takeover``: an in-process restart, an operator);
        either way fencing keeps a still-running old owner from changing anything.
        """
        lease = claim_run(self.journal, run_id, self.owner, self.settings.lease, takeover)
        if lease is None:
            return None
        log.info("claimed run=%s generation=%d owner=%s", run_id, lease.generation, lease.owner)
        return lease

    # -- the loop ------------------------------------------------------------------------

    def run(
        self,
        run_id: str,
        *,
        agent: Agent | str | None = None,
        input: str | None = None,
        lease: Lease | None = None,
        create: bool = True,
        takeover: bool = False,
        task: RunTask | None = None,
    ) -> Outcome:
        """Drive ``run_id`` to done. ``lease``: one already claimed for us (supervisor), and
        ``task``: the run's agent and input as that claim read them (None: read the run).

        ``agent`` and ``input`` name what a new run is (default: this worker's only agent,
        and its own input); a run that exists keeps its own, and a worker refuses, before
        touching it, a run of an agent it does not have. An id that may not name a run
        (:mod:`agent_runtime.store.runid`) is refused with
        :class:`~agent_runtime.errors.InvalidRunId` before anything is written.
        """
        check_run_id(run_id)
        if create:
            chosen = self._chosen(agent)
            self.journal.create_run(run_id, chosen.name, input)
        if task is None or lease is None:
            run = self.journal.require_run(run_id)
            task = RunTask(agent=run.agent, input=run.input)
        owned = agent_of(self.agents, task.agent, run_id)
        if lease is None:
            lease = self.claim(run_id, takeover=takeover)
            if lease is None:
                return already_done(self.journal, run_id)
        history = None  # read at the start of the drive, unless the adoption proved it empty
        if lease.owner != self.owner:
            lease, history = self.journal.adopt(lease, self.owner)
            log.info("adopted run=%s generation=%d owner=%s", run_id, lease.generation, self.owner)
        self._heartbeat = make_heartbeat(
            lease,
            self.settings,
            url=self.heartbeat_url,
            connect=self.heartbeat_connect,
            journal=type(self.journal),
        )
        try:
            with self._holding(lease):
                return self._drive(
                    lease, owned, task.input if task.input is not None else owned.input, history
                )
        finally:
            if self._heartbeat is not None:
                self._heartbeat.stop()
                self._heartbeat = None

    def _chosen(self, agent: Agent | str | None) -> Agent:
        if isinstance(agent, Agent):
            if self.agents.get(agent.name) is not agent:
                self.agents = by_name([*self.agents.values(), agent])
            return agent
        if agent is not None:
            return agent_of(self.agents, agent, "(new)")
        if len(self.agents) != 1:
            raise UnknownAgentChoice(sorted(self.agents))
        return next(iter(self.agents.values()))

    @contextmanager
    def _holding(self, lease: Lease) -> Iterator[None]:
        """Work under ``lease``: its tools' waits check it, and how it ends is recorded
        (:mod:`agent_runtime.loop.stopping`)."""
        self._wait.lease = lease
        try:
            with holding(self.journal, lease, self.backoff):
                yield
        finally:
            self._wait.lease = None

    def resolve(self, run_id: str, *, takeover: bool = False) -> int:
        """Resolve every stranded intent of ``run_id`` by its contract (re-send, check, or,
        for a ``once`` call, park the run for an operator); nothing else."""
        check_run_id(run_id)
        run = self.journal.require_run(run_id)
        agent = agent_of(self.agents, run.agent, run_id)
        lease = self.claim(run_id, takeover=takeover)
        if lease is None:
            return 0
        with self._holding(lease):
            history = self.journal.history(run_id)
            stranded = history.stranded()
            for call in stranded:
                self.actor.act(lease, self.tools_for(agent), history.decisions[call.seq], call)
        self.journal.release(lease, "resolved by an operator", delay=0.0)
        return len(stranded)

    def _drive(
        self, lease: Lease, agent: Agent, task: str | None, history: History | None = None
    ) -> Outcome:
        self.decider.forget(lease.run_id)
        if history is None:
            history = self.journal.history(lease.run_id)
        tools = self.tools_for(agent)
        for stranded in history.stranded():
            decision = history.decisions[stranded.seq]
            with Step(lease, stranded.seq):  # a step the crash interrupted, finished
                history.calls[stranded.seq] = self.actor.act(lease, tools, decision, stranded)
        seq = 0
        llm_calls = max((d.llm_call for d in history.decisions.values()), default=0)
        while True:
            journaled = history.decisions.get(seq)
            call = history.calls.get(seq)
            with Step(lease, seq, replayed=call is not None and call.confirmed):
                if journaled is None:  # the answer's decisions (and refused calls) join history
                    with tracing.span("decide", lease.run_id, seq):
                        self.decider.decide(lease, seq, history, agent, task)
                elif not (call and call.confirmed) and journaled.generation != lease.generation:
                    log.info(  # decided by an earlier owner (not this one's parallel answer)
                        "replayed run=%s seq=%d tool=%s args=%s llm_calls=%d",
                        lease.run_id, seq, journaled.tool, _args(journaled.args),
                        journaled.llm_call,
                    )  # fmt: skip
                decision = history.decisions[seq]
                llm_calls = max(llm_calls, decision.llm_call)
                if decision.tool == DONE:
                    output = output_of(history, decision)
                    self.journal.finish(lease, output)
                    log.info("done run=%s steps=%d llm_calls=%d", lease.run_id, seq, llm_calls)
                    return Outcome(
                        run_id=lease.run_id,
                        status="done",
                        steps=seq,
                        llm_calls=llm_calls,
                        output=output,
                    )
                if (call := history.calls.get(seq)) is None or not call.confirmed:
                    history.calls[seq] = self.actor.act(lease, tools, decision, call)
            seq += 1

    def _guard(self, lease: Lease) -> None:
        if self._heartbeat is not None and self._heartbeat.lost.is_set():
            raise LeaseLost(f"run {lease.run_id}: the heartbeat found the lease taken over")
