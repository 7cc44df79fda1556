"""Deciding a step: ask the agent's model, check its answer, journal it whole.

::

    before_decide -> (the heartbeat's flag, then "do I still own the run?") -> ask the model
    -> check every proposed call against the agent's tools -> after_decide_before_journal
    -> journal the answer and one decision per call (one statement) -> after_decide

An answer the journal cannot hold is :class:`~agent_runtime.errors.MalformedAnswer` and
nothing is journaled (the run stays resumable). A call naming an unknown tool or invalid
arguments is journaled with its answer, already resolved as refused, and its error is the
result the model is shown next (:mod:`agent_runtime.llm.checking`): a crash after the write
replays it, never asks again. Past ``max_bad_answers`` such answers the run fails.
The ownership check right before the model is asked means a worker that lost its run never
buys an answer.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

import httpx

from agent_runtime.backoff import uniform
from agent_runtime.config import Settings
from agent_runtime.crash import CrashPlan
from agent_runtime.errors import ConfigError
from agent_runtime.llm.checking import (
    BadAnswers,
    checked_answer,
    checked_calls,
    refuse_unjournalable,
)
from agent_runtime.llm.conversation import Question
from agent_runtime.llm.models import Answer, ChatModel, DecideModel, Model
from agent_runtime.observe.steps import ModelCall
from agent_runtime.store.journal import Journal
from agent_runtime.store.records import Decision, History, Lease, ModelAnswer, ToolCall
from agent_runtime.tools.agent import Agent
from agent_runtime.tools.tooldef import Tool

__all__ = ["Decider", "checked_answer", "checked_calls"]

log = logging.getLogger(__name__)


def _args(args: dict[str, Any]) -> str:
    return json.dumps(args, sort_keys=False)


class Decider:
    """Asks the models of one worker's agents and journals their answers."""

    def __init__(
        self,
        journal: Journal,
        settings: Settings,
        crash: CrashPlan,
        *,
        guard: Callable[[Lease], None],
        tools: Callable[[Agent], dict[str, Tool]],
        model: Model | None = None,
        transports: Mapping[str, httpx.BaseTransport] | None = None,
        sleep: Callable[[float], None] = time.sleep,
        rand: Callable[[], float] = uniform,
    ) -> None:
        self.journal = journal
        self.settings = settings
        self.crash = crash
        self._guard = guard
        self._tools = tools
        self._model = model
        self._models: dict[str, Model] = {}
        self._transports = dict(transports or {})
        self._sleep = sleep
        self._rand = rand
        # (run, seq) -> a decision this process made and its arguments as checked then, so
        # that acting on that very decision checks them no second time (see typed_for)
        self.typed: dict[tuple[str, int], tuple[Decision, dict[str, Any]]] = {}

    def close(self) -> None:
        for model in {id(m): m for m in [*self._models.values(), self._model] if m}.values():
            model.close()

    def model_for(self, agent: Agent) -> Model:
        """The agent's model client (made once, from the settings and its protocol)."""
        if self._model is not None:
            return self._model
        model = self._models.get(agent.name)
        if model is None:
            s = self.settings
            common: dict[str, Any] = {
                "timeout": s.model_timeout,
                "retries": s.model_retries,
                "backoff": s.retry_backoff,
                "transport": self._transports.get("model"),
                "sleep": self._sleep,
                "rand": self._rand,
            }
            if (s.model_protocol or agent.protocol) == "decide":
                model = DecideModel(s.model_url, **common)
            else:
                name = s.model_name or agent.model
                if not name:
                    raise_missing_model(agent)
                model = ChatModel(s.model_url, model=str(name), api_key=s.model_api_key, **common)
            self._models[agent.name] = model
        return model

    def typed_for(self, run_id: str, decision: Decision) -> dict[str, Any] | None:
        """The checked arguments of ``decision`` if this process made it (once), else None:
        a decision read back from the journal is checked again where it is acted on."""
        made = self.typed.pop((run_id, decision.seq), None)
        return made[1] if made is not None and made[0] is decision else None

    def forget(self, run_id: str) -> None:
        """Drop what :meth:`typed_for` keeps for ``run_id`` (a run (re)starts)."""
        for key in [k for k in self.typed if k[0] == run_id]:
            del self.typed[key]

    def decide(
        self, lease: Lease, seq: int, history: History, agent: Agent, task: str | None
    ) -> list[Decision]:
        self.crash.reached("before_decide", seq)
        bad = BadAnswers.of(history)  # a crash right after the one too many: no new answer
        bad.refuse_more_than(self.settings.max_bad_answers, lease.run_id)
        self._guard(lease)
        self.journal.check_owner(lease, f"model call seq={seq}")
        tools = self._tools(agent)
        question = Question(
            run_id=lease.run_id,
            input=task,
            instructions=agent.instructions,
            history=history,
            tools=list(tools.values()),
        )
        with ModelCall():
            answer = self.model_for(agent).ask(question)
        refuse_unjournalable(answer)
        checked = checked_answer(answer, tools)
        self.crash.reached("after_decide_before_journal", seq)
        refused = {i: c[4] for i, c in enumerate(checked) if c[4] is not None}
        made = self.journal.record_answer(
            lease,
            seq,
            [c[:3] for c in checked],
            message=answer.message,
            usage=answer.usage,
            rejected=refused,
        )
        for decision, (*_, typed, error) in zip(made, checked, strict=True):
            if typed is not None:
                self.typed[lease.run_id, decision.seq] = (decision, typed)
            history.decisions[decision.seq] = decision
            history.answers.setdefault(decision.llm_call, _answer_record(decision, answer))
            log.info(
                "decided run=%s seq=%d tool=%s args=%s llm_calls=%d",
                lease.run_id,
                decision.seq,
                decision.tool,
                _args(decision.args),
                decision.llm_call,
            )
            if error is not None:
                history.calls[decision.seq] = ToolCall.rejected(lease.run_id, decision, error)
                log.warning(
                    "rejected run=%s seq=%d tool=%r error=%r llm_calls=%d",
                    lease.run_id, decision.seq, decision.tool, error["message"],
                    decision.llm_call,
                )  # fmt: skip
        self.crash.reached("after_decide", seq)
        if refused:
            BadAnswers.of(history).refuse_more_than(self.settings.max_bad_answers, lease.run_id)
        return made


def raise_missing_model(agent: Agent) -> None:
    raise ConfigError(
        f"agent {agent.name!r} speaks Chat Completions but names no model: set MODEL_NAME "
        "or the agent's model"
    )


def _answer_record(decision: Decision, answer: Answer) -> ModelAnswer:
    return ModelAnswer(
        llm_call=decision.llm_call,
        message=answer.message,
        usage=answer.usage,
        generation=decision.generation,
        answered_at=decision.decided_at,
    )
