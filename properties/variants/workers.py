"""Broken workers and clients: each one a small, plausible mistake in the step protocol.

Where a mistake sits inside a longer method of the runtime, the method is rewritten here
once with a hook, and each variant overrides the hook: :class:`PatchedLoop` for the
restart's walk over the journal, :class:`PatchedCloudClient` for the client's retries.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Final

from psycopg.types.json import Jsonb

from agent_runtime.clients import CallResult, CloudClient
from agent_runtime.errors import RemoteUnavailable
from agent_runtime.records import Decision, History, Lease, ToolCall, idempotency_key
from agent_runtime.tools import DONE, Tool, check_args, lookup
from agent_runtime.worker import Outcome, Worker

from .journals import fenced

PLACEHOLDER: Final = {"id": "unknown", "status": "created"}  # confirm_before_call's guess


class FreshKeyWorker(Worker):
    """fresh_key: re-sends a stranded intent under a key of its own attempt."""

    def _act(self, lease: Lease, decision: Decision, call: ToolCall | None) -> ToolCall:
        if call is not None:
            key = f"{idempotency_key(lease.run_id, decision.seq)}~{lease.generation}"
            fenced(self.journal, "rekey_intent", lease, "new key", seq=decision.seq, key=key)
            call = dataclasses.replace(call, idem_key=key)
        return super()._act(lease, decision, call)


class EagerConfirmWorker(Worker):
    """confirm_before_call: writes the confirm (a placeholder result) before the call."""

    def _act(self, lease: Lease, decision: Decision, call: ToolCall | None) -> ToolCall:
        seq = decision.seq
        tool = lookup(decision.tool)
        args = check_args(tool, decision.args)
        if call is None:
            self.crash.reached("before_intent", seq)
            call = self.journal.record_intent(lease, seq)
        confirmed = self.journal.record_confirm(lease, call, dict(PLACEHOLDER), "created")
        self.crash.reached("after_intent", seq)
        answer = self.cloud.call(tool, args, key=call.idem_key, generation=lease.generation)
        self.crash.reached("after_call", seq)
        fenced(
            self.journal, "patch_result", lease, f"result seq={seq}", seq=seq,
            result=Jsonb(answer.result), remote=answer.remote_status,
        )  # fmt: skip
        self.crash.reached("after_confirm", seq)
        return dataclasses.replace(
            confirmed, result=answer.result, remote_status=answer.remote_status
        )


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

    def _drive(self, lease: Lease) -> Outcome:
        history = self.journal.history(lease.run_id)
        skipped: set[int] = set()
        for stranded in history.stranded():
            if self._resolves_stranded():
                decision = history.decisions[stranded.seq]
                history.calls[stranded.seq] = self._act(lease, decision, stranded)
            else:
                skipped.add(stranded.seq)  # never re-sent, never confirmed
        seq = self._start(history)
        llm_calls = max((d.llm_call for d in history.decisions.values()), default=0)
        while True:
            if seq in skipped:
                seq += 1
                continue
            found = history.decisions.get(seq)
            call = history.calls.get(seq)
            decision = found if found is not None else self._decide(lease, seq, history)
            history.decisions[seq] = decision
            llm_calls = max(llm_calls, decision.llm_call)
            if decision.tool == DONE:
                self.journal.finish(lease)
                return Outcome(run_id=lease.run_id, status="done", steps=seq, llm_calls=llm_calls)
            if call is None or not call.confirmed:
                history.calls[seq] = self._act(lease, decision, call)
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

    def call(self, tool: Tool, args: dict[str, Any], *, key: str, generation: int) -> CallResult:
        retries, self._retries = self._retries, 0
        try:
            for attempt in range(retries + 1):
                try:
                    got = super().call(
                        tool, args, key=self._key(key, attempt), generation=generation
                    )
                except RemoteUnavailable:
                    if attempt == retries:
                        raise
                    continue
                return dataclasses.replace(
                    got, remote_status=self._status(got.remote_status, attempt)
                )
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


class RetryKeyWorker(Worker):
    """retry_fresh_key: the client's retry path differs from the restart path: it re-sends
    under a new key, where a restart re-sends under the journaled one."""

    cloud_client = RetryKeyClient


class AttemptStatusWorker(Worker):
    """status_from_attempt: records ``created`` for a first attempt and ``already_done`` for
    a retry, whatever the cloud answered."""

    cloud_client = AttemptStatusClient
