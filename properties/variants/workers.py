"""Broken workers and clients: each one a small, plausible mistake in the step protocol.

A mistake in how a call is carried out is an :class:`~agent_runtime.tools.acting.Actor` subclass
(a worker's ``actor_class``); one in the restart's walk is the runtime's loop rewritten
once with hooks (:class:`PatchedLoop`); one in the cloud client's retries is the runtime's
client with hooks (:class:`PatchedCloudClient`), handed to the provisioning agent's tools.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, Final

from psycopg.types.json import Jsonb

from agent_runtime.clients import CallResult, CloudClient
from agent_runtime.errors import RemoteUnavailable
from agent_runtime.llm.conversation import DONE
from agent_runtime.loop.outcome import Outcome
from agent_runtime.loop.worker import Worker
from agent_runtime.store.records import Decision, History, Lease, ToolCall, idempotency_key
from agent_runtime.tools.acting import Actor
from agent_runtime.tools.agent import Agent
from agent_runtime.tools.provisioning import make_tools
from agent_runtime.tools.tooldef import Call, Result, Tool

from .journals import fenced

PLACEHOLDER: Final = {"id": "unknown", "status": "created"}  # confirm_before_call's guess


class FreshKeyActor(Actor):
    """fresh_key: re-sends a stranded intent under a key of its own attempt."""

    def act(
        self, lease: Lease, tools: Mapping[str, Tool], decision: Decision, call: ToolCall | None
    ) -> ToolCall:
        if call is not None:
            key = f"{idempotency_key(lease.run_id, decision.seq)}~{lease.generation}"
            fenced(self.journal, "rekey_intent", lease, "new key", seq=decision.seq, key=key)
            call = dataclasses.replace(call, idem_key=key)
        return super().act(lease, tools, decision, call)


class FreshKeyWorker(Worker):
    actor_class = FreshKeyActor


class EagerConfirmActor(Actor):
    """confirm_before_call: writes the confirm (a placeholder result) before the call."""

    def act(
        self, lease: Lease, tools: Mapping[str, Tool], decision: Decision, call: ToolCall | None
    ) -> ToolCall:
        seq = decision.seq
        tool = tools[decision.tool]
        args = tool.validate(decision.args)
        if call is None:
            self.crash.reached("before_intent", seq)
            call = self.journal.record_intent(lease, seq, tool.effect)
        confirmed = self.journal.record_confirm(lease, call, dict(PLACEHOLDER), "created")
        self.crash.reached("after_intent", seq)
        context = Call(run_id=lease.run_id, seq=seq, key=call.idem_key, generation=lease.generation)
        answer = tool(context, args)
        self.crash.reached("after_call", seq)
        fenced(
            self.journal, "patch_result", lease, f"result seq={seq}", seq=seq,
            result=Jsonb(answer.value), remote=answer.status,
        )  # fmt: skip
        self.crash.reached("after_confirm", seq)
        return dataclasses.replace(confirmed, result=answer.value, remote_status=answer.status)


class EagerConfirmWorker(Worker):
    actor_class = EagerConfirmActor


class CheckBlindActor(Actor):
    """check_skipped: a restart sends a stranded checked call again without asking the
    remote first (the check runs only for a retry within one attempt loop)."""

    def _attempts(
        self,
        lease: Lease,
        tool: Tool,
        context: Call,
        args: Mapping[str, Any],
        call: ToolCall,
        *,
        checking: bool,
    ) -> tuple[str, Result]:
        return super()._attempts(lease, tool, context, args, call, checking=False)


class CheckBlindWorker(Worker):
    actor_class = CheckBlindActor


class EarlyCheckActor(Actor):
    """check_in_flight: a checked call is checked at once, while an earlier attempt of it
    may still act at the remote (issue 21's duplicate email: point 1 reverted)."""

    def _await_landing(self, lease: Lease, call: ToolCall) -> None:
        self.journal.check_owner(lease, f"check of {call.idem_key}")


class EarlyCheckWorker(Worker):
    actor_class = EarlyCheckActor


class OnceAsKeyedActor(Actor):
    """once_resent: a restart dispatches a stranded intent on the effect the decision's tool
    *would* have if it were keyed: a once call is re-sent instead of parked."""

    def act(
        self, lease: Lease, tools: Mapping[str, Tool], decision: Decision, call: ToolCall | None
    ) -> ToolCall:
        if call is not None and call.effect == "once":
            call = dataclasses.replace(call, effect="keyed")
        return super().act(lease, tools, decision, call)


class OnceAsKeyedWorker(Worker):
    actor_class = OnceAsKeyedActor


class OwnerBlindSendActor(Actor):
    """unchecked_send: no "do I still own the run?" before a checked or once call, whose
    remote fences nothing: a worker that lost its run while at the gate still sends."""

    def _still_owner(self, lease: Lease, tool: Tool, call: ToolCall) -> None:
        return None


class OwnerBlindSendWorker(Worker):
    actor_class = OwnerBlindSendActor


class RemoteFencedActor(Actor):
    """keyed_send_unchecked: a keyed call is trusted to the remote's own fencing (it refuses
    an older generation than one it served), so no ownership read before it; after an
    operator's cancel no newer generation ever reaches the remote, and the cancelled
    worker's send goes through (the runtime before issue 21's point 3)."""

    def _still_owner(self, lease: Lease, tool: Tool, call: ToolCall) -> None:
        if tool.effect != "keyed":
            super()._still_owner(lease, tool, call)


class RemoteFencedWorker(Worker):
    actor_class = RemoteFencedActor


class HeartbeatDeafWorker(Worker):
    """heartbeat_ignored: never looks at what its heartbeat found, so a worker whose
    renewal failed still sends the tool call it was about to make."""

    def _guard(self, lease: Lease) -> None:
        return None


# -- the restart's walk over the journal ------------------------------------------------------


class PatchedLoop(Worker):
    """The runtime's loop with two hooks: where the walk starts, and what it skips."""

    def _start(self, history: History) -> int:
        return 0

    def _resolves_stranded(self) -> bool:
        return True

    def _drive(
        self, lease: Lease, agent: Agent, task: str | None, history: History | None = None
    ) -> Outcome:
        if history is None:
            history = self.journal.history(lease.run_id)
        tools = self.tools_for(agent)
        skipped: set[int] = set()
        for stranded in history.stranded():
            if self._resolves_stranded():
                decision = history.decisions[stranded.seq]
                history.calls[stranded.seq] = self.actor.act(lease, tools, decision, stranded)
            else:
                skipped.add(stranded.seq)  # never re-sent, never confirmed
        seq = self._start(history)
        llm_calls = max((d.llm_call for d in history.decisions.values()), default=0)
        while True:
            if seq in skipped:
                seq += 1
                continue
            if seq not in history.decisions:
                for made in self.decider.decide(lease, seq, history, agent, task):
                    history.decisions[made.seq] = made
            decision, call = history.decisions[seq], history.calls.get(seq)
            llm_calls = max(llm_calls, decision.llm_call)
            if decision.tool == DONE:
                self.journal.finish(lease)
                return Outcome(run_id=lease.run_id, status="done", steps=seq, llm_calls=llm_calls)
            if call is None or not call.confirmed:
                history.calls[seq] = self.actor.act(lease, tools, decision, call)
            seq += 1


class CarryOnWorker(PatchedLoop):
    """no_intent_resolution: a restart assumes a stranded intent worked and carries on."""

    def _resolves_stranded(self) -> bool:
        return False


class WalkPastDecisionsWorker(PatchedLoop):
    """walk_off_by_one: a restart resumes after the last *decided* step, not after the
    last confirmed one, so a decision that was never acted on is skipped."""

    def _start(self, history: History) -> int:
        return len(history.decisions)


# -- the client's retries ---------------------------------------------------------------------


class PatchedCloudClient(CloudClient):
    """The runtime's cloud client with two hooks: the key of an attempt, and the status
    recorded from an answer. Each attempt is the runtime's own single request."""

    def _key(self, key: str, attempt: int) -> str:
        return key

    def _status(self, answered: str, attempt: int) -> str:
        return answered

    def call(self, path: str, args: dict[str, Any], *, key: str, generation: int) -> CallResult:
        retries, self._retries = self._retries, 0
        try:
            for attempt in range(retries + 1):
                sent = self._key(key, attempt)
                try:
                    got = super().call(path, args, key=sent, generation=generation)
                except RemoteUnavailable:
                    if attempt == retries:
                        raise
                    continue
                status = self._status(got.remote_status, attempt)
                return dataclasses.replace(got, remote_status=status)
        finally:
            self._retries = retries
        raise AssertionError("unreachable: the last attempt returns or raises")


class RetryKeyClient(PatchedCloudClient):
    """A retry after a timeout or a 5xx goes out under a key of its own attempt."""

    def _key(self, key: str, attempt: int) -> str:
        return key if attempt == 0 else f"{key}/retry-{attempt}"


class AttemptStatusClient(PatchedCloudClient):
    """``remote_status`` comes from the attempt number (a retry must have found it done),
    not from the cloud's answer."""

    def _status(self, answered: str, attempt: int) -> str:
        return "created" if attempt == 0 else "already_done"


class _PatchedClientWorker(Worker):
    """The provisioning agent's tools over another cloud client class."""

    client: type[CloudClient] = CloudClient

    def tools_for(self, agent: Agent) -> dict[str, Tool]:
        if agent.tools is not make_tools:  # not a cloud agent: its own tools, unpatched
            return super().tools_for(agent)
        tools = self._tools.get(agent.name)
        if tools is None:
            made = make_tools(self.wiring(), client=self.client)
            tools = self._tools[agent.name] = {t.name: t for t in made}
        return tools


class RetryKeyWorker(_PatchedClientWorker):
    """retry_fresh_key: the client's retry path differs from the restart path: it re-sends
    under a new key, where a restart re-sends under the journaled one."""

    client = RetryKeyClient


class AttemptStatusWorker(_PatchedClientWorker):
    """status_from_attempt: records ``created`` for a first attempt and ``already_done`` for
    a retry, whatever the cloud answered."""

    client = AttemptStatusClient
