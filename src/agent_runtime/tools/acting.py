"""Carrying out one decided tool call under its effect contract: intent, call, confirm.

::

    (first time) before_intent -> journal intent -> after_intent -> call -> after_call
                 -> journal confirm -> after_confirm
    (a restart, the intent without a confirm) by the contract journaled with the intent:
        keyed    after_intent -> call again under the same key (answered already_done)
        checked  after_intent -> check; the effect exists: confirm what it found; else call
        read     after_intent -> call again
        once     park the run: needs attention, an operator decides (resolve --seq N ...)
        (an operator's redo) before_intent -> the redo becomes this worker's intent again
                 -> after_intent -> call once more (a crash after it: an intent in doubt,
                 which parks the run again; never a second send of its own)

A request can outlive its sender, so every attempt's start is journaled, durably, before
it leaves (the intent for the first, :meth:`~agent_runtime.store.journal.Journal.record_send` for
each later one), with the moment until which it may still act at the remote (the tool's
``in_flight`` bound, on the database clock). A ``checked`` call's check -- on a restart
and on the worker's own retry alike -- runs only once that moment has passed: asked
earlier, the remote could answer "absent" about a request it is still working on, and the
send that follows would act twice. The worker waits it out (its heartbeat keeps the lease);
when the database clock does not move while it waits (a frozen test clock), it releases the
run until then instead (:class:`~agent_runtime.errors.CallInFlight`).

Right before each attempt of a call with an effect (``keyed``, ``checked``, ``once``) the
worker makes sure in the journal that it still owns the run: a read by primary key after
the intent, and for every later attempt the fenced write of its start (``record_send``; a
checked call's wait before its check is a fenced read as well). A
``checked`` or ``once`` remote fences nothing; a ``keyed`` one refuses a generation older
than one it has served, but after an operator's cancel no newer generation ever reaches
it, so only this read keeps a cancelled worker's send or retry from going out. A ``read``
has no effect to guard.

A result the journal cannot hold (:mod:`agent_runtime.store.journalable`: NaN, an infinity,
U+0000, a value that is not JSON) is refused at this edge: the call is confirmed ``failed``
with an ``UnjournalableResult`` error the model sees, and the run goes on.

An attempt that raises one of the tool's ``retry_on`` exceptions may or may not have acted:
it is tried again by the same contract (a checked tool checks first; a ``once`` tool parks
the run at once), up to the tool's ``retries``; then the run stops resumably with the intent
on record. Any other exception is a clear failure of the call: it is confirmed as
``failed`` with the error, which the model sees as the call's result. An
:class:`~agent_runtime.errors.AgentRuntimeError` keeps its own meaning.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from agent_runtime.backoff import Backoff
from agent_runtime.crash import CrashPlan
from agent_runtime.errors import (
    AgentRuntimeError,
    CallInFlight,
    InvalidArguments,
    NeedsAttention,
    RemoteUnavailable,
    UnusableDecision,
)
from agent_runtime.logfmt import brief
from agent_runtime.observe import tracing
from agent_runtime.store.journal import Journal
from agent_runtime.store.journalable import problem
from agent_runtime.store.records import Decision, Lease, ToolCall
from agent_runtime.tools.tooldef import Call, Result, Tool

log = logging.getLogger(__name__)

FAILED = "failed"  # the state and remote status of a call that failed for certain


def _journalable(
    lease: Lease, tool: Tool, seq: int, state: str, result: Result
) -> tuple[str, Result]:
    """``result``, or a failure the model sees when the journal cannot hold what the tool
    answered (NaN, an infinity, U+0000, a value that is not JSON: journalable.py)."""
    found = problem(result.value, where="result")
    if found is None:
        return state, result
    message = (
        f"tool {tool.name} answered a value the journal cannot hold ({found}); the call may "
        "have acted"
    )
    log.warning("tool-failed run=%s seq=%d tool=%s error=%r", lease.run_id, seq, tool.name, message)
    return FAILED, Result({"error": "UnjournalableResult", "message": message}, status=FAILED)


class Actor:
    """Executes decided calls for one worker (its journal, crash plan, guard and waits)."""

    def __init__(
        self,
        journal: Journal,
        crash: CrashPlan,
        *,
        guard: Callable[[Lease], None],
        sleep: Callable[[float], None],
        backoff: Callable[[float], Backoff],
        typed_for: Callable[[str, Decision], Mapping[str, Any] | None] = lambda run, d: None,
        in_flight: float | None = None,
    ) -> None:
        """``in_flight``: seconds a request of a tool that declares no bound of its own may
        still act after it was sent (the worker's ``Settings.in_flight``)."""
        self.journal = journal
        self.crash = crash
        self._guard = guard
        self._sleep = sleep
        self._backoff = backoff
        self._typed_for = typed_for
        self._in_flight = in_flight

    def bound(self, tool: Tool) -> float | None:
        """Seconds an attempt of ``tool`` may still act at its remote after it was sent."""
        return tool.in_flight if tool.in_flight is not None else self._in_flight

    def act(
        self, lease: Lease, tools: Mapping[str, Tool], decision: Decision, call: ToolCall | None
    ) -> ToolCall:
        """Carry out ``decision`` (``call``: its intent, when a restart finds one).

        Its arguments were checked when this process decided it (``typed_for`` hands them
        over); a decision read back from the journal is checked here, once for every
        attempt."""
        seq = decision.seq
        typed = self._typed_for(lease.run_id, decision)
        tool = tools.get(decision.tool)
        if tool is None:
            raise UnusableDecision(
                f"journaled decision seq={seq} names tool {decision.tool!r}, which this "
                f"agent does not have (it has: {', '.join(sorted(tools))})"
            )
        if typed is None:
            try:
                typed = tool.checked(decision.args)[1]
            except InvalidArguments as exc:
                raise UnusableDecision(
                    f"journaled decision seq={seq} cannot be acted on: {exc}"
                ) from exc
        args = typed
        first = call is None or call.state == "redo"  # this attempt's start is journaled next
        if call is None:
            self.crash.reached("before_intent", seq)
            with tracing.span("intent", lease.run_id, seq, effect=tool.effect) as span:
                call = self.journal.record_intent(lease, seq, tool.effect, self.bound(tool))
                span.set("key", call.idem_key)
        elif call.state == "intent" and call.effect == "once":
            self._park(lease, call, f"tool {tool.name} is 'once' and its call may have acted")
        elif call.state == "redo":
            self.crash.reached("before_intent", seq)
            with tracing.span("intent", lease.run_id, seq, key=call.idem_key, redo=True):
                call = self.journal.record_redo(lease, call, self.bound(tool))
            log.info(
                "resending run=%s seq=%d key=%s effect=%s",
                lease.run_id, seq, call.idem_key, "redo ordered by an operator",
            )  # fmt: skip
        else:
            log.info(
                "%s run=%s seq=%d key=%s effect=%s",
                "checking" if call.effect == "checked" else "resending",
                lease.run_id, seq, call.idem_key, call.effect,
            )  # fmt: skip
        self.crash.reached("after_intent", seq)
        self._guard(lease)
        if first:  # a re-send is fenced by the write of its start (record_send) instead
            self._still_owner(lease, tool, call)
        context = Call(
            run_id=lease.run_id,
            seq=seq,
            key=call.idem_key,
            generation=lease.generation,
            tool_call_id=decision.call_id,
        )
        with tracing.span(
            "call", lease.run_id, seq, key=call.idem_key, effect=call.effect, tool=tool.name
        ) as span:
            state, result = self._attempts(lease, tool, context, args, call, checking=not first)
            span.set("remote_status", result.status)
        state, result = _journalable(lease, tool, seq, state, result)
        self.crash.reached("after_call", seq)
        with tracing.span(
            "confirm", lease.run_id, seq, key=call.idem_key, effect=call.effect,
            remote_status=result.status, state=state,
        ):  # fmt: skip
            confirmed = self.journal.record_confirm(
                lease, call, result.value, result.status, state=state
            )
        log.info(
            "confirmed run=%s seq=%d key=%s result=%s remote=%s",
            lease.run_id,
            seq,
            call.idem_key,
            brief(result.value),
            result.status,
        )
        self.crash.reached("after_confirm", seq)
        return confirmed

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
        """(state, result) of the call, after as many attempts as the contract allows."""
        backoff = self._backoff(tool.backoff)
        problem = ""
        for attempt in range(1, tool.retries + 2):
            if attempt > 1:
                log.info(
                    "tool-retry run=%s seq=%d tool=%s attempt=%d after=%r",
                    lease.run_id, context.seq, tool.name, attempt, problem,
                )  # fmt: skip
                self._sleep(backoff.delay(attempt - 1))
                self._guard(lease)
            attempted = Call(**{**context.__dict__, "attempt": attempt})
            again = checking or attempt > 1  # an earlier attempt may have left
            try:
                if tool.effect == "checked" and again:
                    self._await_landing(lease, call)
                    found = tool.look_typed(attempted, args)
                    log.info(
                        "%s run=%s seq=%d key=%s effect=checked found=%s",
                        "checked" if found is not None else "resending",
                        lease.run_id, context.seq, call.idem_key, "no" if found is None else "yes",
                    )  # fmt: skip
                    if found is not None:
                        return "confirmed", found
                if again and tool.effect != "read":
                    call = self.journal.record_send(lease, call, self.bound(tool))
                return "confirmed", tool.invoke(attempted, args)
            except AgentRuntimeError:
                raise
            except tool.retry_on as exc:
                problem = f"{type(exc).__name__}: {exc}"
                if tool.effect == "once":
                    self._park(lease, call, f"tool {tool.name} is 'once' and raised {problem}")
            except Exception as exc:  # the tool failed for certain: the model hears why
                failure = {"error": type(exc).__name__, "message": str(exc)[:500]}
                log.warning(
                    "tool-failed run=%s seq=%d tool=%s error=%r",
                    lease.run_id, context.seq, tool.name, f"{type(exc).__name__}: {exc}",
                )  # fmt: skip
                return FAILED, Result(failure, status=FAILED)
        raise RemoteUnavailable(
            f"tool {tool.name} did not get through for key={call.idem_key} in "
            f"{tool.retries + 1} attempt(s) (last: {problem}); the intent stays on record "
            f"and a restart resolves it as {tool.effect!r}"
        )

    def _await_landing(self, lease: Lease, call: ToolCall) -> None:
        """Return once no journaled attempt of ``call`` can act any more (on the database
        clock), sleeping meanwhile; :class:`CallInFlight` when the clock hardly moved while
        this worker slept (less than half the wait: a frozen or skewed clock), so the run
        is released until then rather than checked early."""
        waited: float | None = None
        while True:
            seconds = self.journal.landing_wait(lease, call)
            if seconds <= 0:
                return
            if waited is not None and waited - seconds < waited / 2:
                raise CallInFlight(
                    f"call {call.idem_key} may still act at its remote for {seconds:.3f}s "
                    "more (an earlier attempt's in-flight bound) and the clock did not move "
                    "while this worker waited; released until then, never checked early",
                    retry_after=seconds,
                )
            log.info(
                "awaiting-landing run=%s seq=%d key=%s seconds=%.3f",
                lease.run_id, call.seq, call.idem_key, seconds,
            )  # fmt: skip
            self._sleep(seconds)
            waited = seconds

    def _still_owner(self, lease: Lease, tool: Tool, call: ToolCall) -> None:
        """Before an attempt of a call with an effect: unless this worker still owns the
        run (a takeover or an operator's cancel), :class:`~agent_runtime.errors.LeaseLost`."""
        if tool.effect != "read":
            self.journal.check_owner(lease, f"{tool.effect} call {call.idem_key}")

    def _park(self, lease: Lease, call: ToolCall, why: str) -> None:
        reason = (
            f"{why}: call {call.idem_key} is in doubt; resolve it with `python -m "
            f"agent_runtime resolve {lease.run_id} --seq {call.seq} --confirm JSON | --redo "
            "| --fail`"
        )
        self.journal.park(lease, reason)
        log.warning(
            "needs-attention run=%s seq=%d key=%s reason=%r",
            lease.run_id,
            call.seq,
            call.idem_key,
            why,
        )
        raise NeedsAttention(reason)
