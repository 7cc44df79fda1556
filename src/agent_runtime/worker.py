"""The durable step loop: decide, journal, intend, call, confirm.

One step, with the crash points where they fall::

    before_decide -> ask model -> after_decide_before_journal -> journal decision
    -> after_decide -> check args -> before_intent -> journal intent -> after_intent
    -> call cloud (key <run>:<seq>) -> after_call -> journal confirm -> after_confirm

A (re)start reads the run's history back, first re-sends every intent that has
no confirm under its original key, then replays journaled decisions instead of
asking the model again, and asks the model only for steps never decided.

How a run under a lease stops: a permanent error fails it; any other error, the
runtime's own or one it did not expect (a bug: logged with its traceback, raised as
:class:`UnexpectedError`), releases it with the reason and a backoff
(``settings.run_backoff_rule()``), so it is not claimed again before the wait has passed.
"""

from __future__ import annotations

import functools
import json
import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import httpx

from . import db
from .backoff import uniform
from .clients import CloudClient, ModelClient
from .config import Settings
from .crash import CrashPlan
from .errors import (
    AgentRuntimeError,
    BackingOff,
    InvalidArguments,
    LeaseLost,
    RunNotFound,
    RunUnavailable,
    UnexpectedError,
    UnknownTool,
    UnusableDecision,
)
from .journal import Journal
from .lease import Heartbeat, owner_is_dead, owner_token
from .records import Decision, History, Lease, Run, ToolCall
from .runid import check_run_id
from .tools import DONE, check_args, lookup, parse_answer

log = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True)
class Outcome:
    run_id: str
    status: str  # 'done' here; failures raise
    steps: int  # confirmed tool calls
    llm_calls: int  # journaled model answers


def _args(args: dict[str, Any]) -> str:
    return json.dumps(args, sort_keys=False)


class Worker:
    """Drives runs to completion against one database connection and two remotes."""

    # The clients :meth:`build` makes; a subclass may swap one for its own.
    model_client: type[ModelClient] = ModelClient
    cloud_client: type[CloudClient] = CloudClient

    def __init__(
        self,
        journal: Journal,
        settings: Settings,
        *,
        model: ModelClient,
        cloud: CloudClient,
        crash: CrashPlan | None = None,
        heartbeat_url: str | None = None,
        owner: str | None = None,
        heartbeat_connect: Callable[[], db.Connection] | None = None,
        rand: Callable[[], float] = uniform,
    ) -> None:
        """``heartbeat_url``: renew the lease from a thread on a connection of its own.
        ``heartbeat_connect`` instead: the lease gets a :class:`Heartbeat` over connections
        from there, but no thread; the caller beats it (:attr:`heartbeat`). Neither: no
        renewal at all (a test that moves the clock itself). ``rand``: the jitter of the
        run's backoff, a number in [0, 1)."""
        self.journal = journal
        self.settings = settings
        self.model = model
        self.cloud = cloud
        self.crash = crash if crash is not None else settings.crash
        self.heartbeat_url = heartbeat_url
        self.heartbeat_connect = heartbeat_connect
        self.owner = owner or owner_token()
        self.backoff = settings.run_backoff_rule(rand)
        self._heartbeat: Heartbeat | None = None

    @classmethod
    def open(
        cls,
        settings: Settings,
        url: str,
        *,
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
        model_transport: httpx.BaseTransport | None = None,
        cloud_transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] = time.sleep,
        crash: CrashPlan | None = None,
        heartbeat_url: str | None = None,
        owner: str | None = None,
        heartbeat_connect: Callable[[], db.Connection] | None = None,
        rand: Callable[[], float] = uniform,
    ) -> Worker:
        """A worker on a journal you connected, with clients made from ``settings``;
        ``sleep`` and ``rand`` are how both clients wait between attempts."""
        return cls(
            journal,
            settings,
            model=cls.model_client(
                settings.model_url,
                timeout=settings.model_timeout,
                retries=settings.model_retries,
                backoff=settings.retry_backoff,
                transport=model_transport,
                sleep=sleep,
                rand=rand,
            ),
            cloud=cls.cloud_client(
                settings.cloud_url,
                timeout=settings.tool_timeout,
                retries=settings.tool_retries,
                backoff=settings.retry_backoff,
                transport=cloud_transport,
                sleep=sleep,
                rand=rand,
            ),
            crash=crash,
            heartbeat_url=heartbeat_url,
            owner=owner,
            heartbeat_connect=heartbeat_connect,
            rand=rand,
        )

    @property
    def heartbeat(self) -> Heartbeat | None:
        """The renewal of the lease held right now, if any."""
        return self._heartbeat

    def close(self) -> None:
        self.model.close()
        self.cloud.close()
        self.journal.conn.close()

    # -- claiming ------------------------------------------------------------------------

    def claim(self, run_id: str, *, takeover: bool = False) -> Lease | None:
        """Take the run, or None if it is already done. Creates nothing.

        A live lease is taken over only when its owner provably died (same host, pid
        gone) or the caller says so (``takeover``: an in-process restart, an operator);
        either way fencing keeps a still-running old owner from changing anything.
        """
        lease = self.journal.claim(run_id, self.owner, self.settings.lease)
        if lease is None:
            run = self.journal.get_run(run_id)
            if run is None:
                raise RunNotFound(f"no run with id {run_id!r}")
            if run.status == "done":
                return None
            if run.status in ("failed", "cancelled"):
                hint = (
                    f"; `python -m agent_runtime retry {run_id}` puts it back to pending"
                    if run.status == "failed"
                    else ""
                )
                raise RunUnavailable(
                    f"run {run_id} is {run.status}: {run.failure or 'no reason recorded'}{hint}"
                )
            if run.backing_off:
                raise _backing_off(run)
            dead = run.lease_live and owner_is_dead(run.owner)
            if run.lease_live and (takeover or dead):
                log.info(
                    "takeover run=%s previous_owner=%s previous_generation=%d reason=%s",
                    run_id,
                    run.owner,
                    run.generation,
                    "owner-process-gone" if dead else "requested",
                )
                lease = self.journal.claim(
                    run_id,
                    self.owner,
                    self.settings.lease,
                    dead_owner=run.owner,
                    dead_generation=run.generation,
                    forced=not dead,
                )
            if lease is None:
                raise RunUnavailable(
                    f"run {run_id} is held by {run.owner} (generation {run.generation}) "
                    f"until {run.lease_expires_at:%H:%M:%S}; the supervisor takes it over "
                    "if that worker stops renewing"
                )
        log.info("claimed run=%s generation=%d owner=%s", run_id, lease.generation, lease.owner)
        return lease

    # -- the loop ------------------------------------------------------------------------

    def run(
        self,
        run_id: str,
        *,
        lease: Lease | None = None,
        create: bool = True,
        takeover: bool = False,
    ) -> Outcome:
        """Drive ``run_id`` to done. ``lease``: one already claimed for us (supervisor).

        An id that may not name a run (:mod:`agent_runtime.runid`) is refused with
        :class:`~agent_runtime.errors.InvalidRunId` before anything is written.
        """
        check_run_id(run_id)
        if create:
            self.journal.create_run(run_id)
        if lease is None:
            lease = self.claim(run_id, takeover=takeover)
            if lease is None:
                return self._already_done(run_id)
        elif lease.owner != self.owner:
            lease = self.journal.adopt(lease, self.owner)
            log.info("adopted run=%s generation=%d owner=%s", run_id, lease.generation, self.owner)
        self._heartbeat = self._make_heartbeat(lease)
        try:
            with self._holding(lease):
                return self._drive(lease)
        finally:
            if self._heartbeat is not None:
                self._heartbeat.stop()
                self._heartbeat = None

    def _make_heartbeat(self, lease: Lease) -> Heartbeat | None:
        url = self.heartbeat_url
        connect = self.heartbeat_connect
        if url is not None:
            connect = functools.partial(db.connect, url, application_name="agent_runtime.heartbeat")
        if connect is None:
            return None
        heartbeat = Heartbeat(
            lease,
            connect=connect,
            lease_seconds=self.settings.lease,
            interval=self.settings.heartbeat,
            journal=type(self.journal),
        )
        return heartbeat.start() if url is not None else heartbeat

    @contextmanager
    def _holding(self, lease: Lease) -> Iterator[None]:
        """How work under a lease ends: fenced (say by whom), or stopped with a reason."""
        try:
            yield
        except LeaseLost as exc:
            log.warning(
                "fenced run=%s generation=%d reason=%r", lease.run_id, lease.generation, str(exc)
            )
            self._explain_fencing(lease)
            raise
        except AgentRuntimeError as exc:
            self._stop_on_error(lease, exc)
            raise
        except Exception as exc:  # a bug: keep the reason, say it once with its traceback
            wrapped = UnexpectedError(f"{type(exc).__name__}: {exc}")
            self._stop_on_error(lease, wrapped, cause=exc)
            raise wrapped from exc

    def _explain_fencing(self, lease: Lease) -> None:
        """Say who holds the run now: another owner, or an operator's cancel."""
        try:
            run = self.journal.get_run(lease.run_id)
        except AgentRuntimeError:
            return
        if run is not None:
            log.warning(
                "lost-run run=%s mine=%d now_generation=%d now_status=%s now_owner=%s",
                lease.run_id,
                lease.generation,
                run.generation,
                run.status,
                run.owner,
            )

    def resolve(self, run_id: str, *, takeover: bool = False) -> int:
        """Re-send every stranded intent of ``run_id`` and record the answers; nothing else."""
        check_run_id(run_id)
        lease = self.claim(run_id, takeover=takeover)
        if lease is None:
            return 0
        with self._holding(lease):
            history = self.journal.history(run_id)
            stranded = history.stranded()
            for call in stranded:
                self._act(lease, history.decisions[call.seq], call)
        self.journal.release(lease, "resolved by an operator", delay=0.0)
        return len(stranded)

    def _stop_on_error(
        self, lease: Lease, exc: AgentRuntimeError, *, cause: BaseException | None = None
    ) -> None:
        """Record why the run stopped, and say it in the one ERROR line of this failure
        (with ``cause``'s traceback: an exception the runtime did not expect).

        A resumable stop releases the run with a backoff: the ``n``-th claim since the last
        progress waits ``backoff.delay(n)`` before the next one may take the run.
        """
        reason = f"{type(exc).__name__}: {exc}"
        run_id = lease.run_id
        try:
            if exc.permanent:
                self.journal.fail(lease, reason)
                log.error("failed run=%s reason=%r", run_id, reason, exc_info=cause)
            else:
                delay = self.backoff.delay(self.journal.require_run(run_id).attempts)
                self.journal.release(lease, reason, delay)
                log.error("stopped run=%s resumable=yes reason=%r", run_id, reason, exc_info=cause)
        except AgentRuntimeError as inner:
            log.error(
                "stopped run=%s reason=%r unrecorded=%r", run_id, reason, str(inner), exc_info=cause
            )
        exc.reported = True

    def _already_done(self, run_id: str) -> Outcome:
        history = self.journal.history(run_id)
        run = self.journal.require_run(run_id)
        steps = sum(1 for c in history.calls.values() if c.confirmed)
        log.info("already-done run=%s steps=%d llm_calls=%d", run_id, steps, run.llm_calls)
        return Outcome(run_id=run_id, status="done", steps=steps, llm_calls=run.llm_calls)

    def _drive(self, lease: Lease) -> Outcome:
        history = self.journal.history(lease.run_id)
        for stranded in history.stranded():
            confirmed = self._act(lease, history.decisions[stranded.seq], stranded)
            history.calls[stranded.seq] = confirmed
        seq = 0
        llm_calls = max((d.llm_call for d in history.decisions.values()), default=0)
        while True:
            decision = history.decisions.get(seq)
            call = history.calls.get(seq)
            if decision is None:
                decision = self._decide(lease, seq, history)
                history.decisions[seq] = decision
            elif call is None or not call.confirmed:
                log.info(
                    "replayed run=%s seq=%d tool=%s args=%s llm_calls=%d",
                    lease.run_id,
                    seq,
                    decision.tool,
                    _args(decision.args),
                    decision.llm_call,
                )
            llm_calls = max(llm_calls, decision.llm_call)
            if decision.tool == DONE:
                self.journal.finish(lease)
                steps = seq
                log.info("done run=%s steps=%d llm_calls=%d", lease.run_id, steps, llm_calls)
                return Outcome(run_id=lease.run_id, status="done", steps=steps, llm_calls=llm_calls)
            if call is None or not call.confirmed:
                history.calls[seq] = self._act(lease, decision, call)
            seq += 1

    def _guard(self, lease: Lease) -> None:
        if self._heartbeat is not None and self._heartbeat.lost.is_set():
            raise LeaseLost(f"run {lease.run_id}: the heartbeat found the lease taken over")

    def _decide(self, lease: Lease, seq: int, history: History) -> Decision:
        self.crash.reached("before_decide", seq)
        self._guard(lease)
        self.journal.check_owner(lease, f"model call seq={seq}")
        raw = self.model.decide(lease.run_id, history.confirmed_steps())
        tool, args = parse_answer(raw)
        self.crash.reached("after_decide_before_journal", seq)
        decision = self.journal.record_decision(lease, seq, tool, args)
        log.info(
            "decided run=%s seq=%d tool=%s args=%s llm_calls=%d",
            lease.run_id,
            seq,
            tool,
            _args(args),
            decision.llm_call,
        )
        self.crash.reached("after_decide", seq)
        return decision

    def _act(self, lease: Lease, decision: Decision, call: ToolCall | None) -> ToolCall:
        seq = decision.seq
        try:
            tool = lookup(decision.tool)
            args = check_args(tool, decision.args)
        except (UnknownTool, InvalidArguments) as exc:
            raise UnusableDecision(
                f"journaled decision seq={seq} cannot be acted on: {exc}"
            ) from exc
        if call is None:
            self.crash.reached("before_intent", seq)
            call = self.journal.record_intent(lease, seq)
        else:
            log.info("resending run=%s seq=%d key=%s", lease.run_id, seq, call.idem_key)
        self.crash.reached("after_intent", seq)
        self._guard(lease)
        answer = self.cloud.call(tool, args, key=call.idem_key, generation=lease.generation)
        self.crash.reached("after_call", seq)
        confirmed = self.journal.record_confirm(lease, call, answer.result, answer.remote_status)
        log.info(
            "confirmed run=%s seq=%d key=%s result=%s remote=%s",
            lease.run_id,
            seq,
            call.idem_key,
            answer.result.get("id"),
            answer.remote_status,
        )
        self.crash.reached("after_confirm", seq)
        return confirmed


def _backing_off(run: Run) -> BackingOff:
    assert run.lease_expires_at is not None
    wait = (run.lease_expires_at - run.now).total_seconds()
    return BackingOff(
        f"run {run.id} is backing off after {run.attempts} attempt(s) until "
        f"{run.lease_expires_at.isoformat(timespec='milliseconds')} ({wait:.1f}s from now; "
        f"last: {run.failure or 'no reason recorded'}); the supervisor resumes it then, "
        f"or `python -m agent_runtime retry {run.id}` ends the wait now"
    )
