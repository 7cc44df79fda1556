"""Deciding a step: ask the agent's model, check its answer, journal it whole.

::

    before_decide -> (the heartbeat's flag, then "do I still own the run?") -> ask the model
    -> check every proposed call against the agent's tools -> after_decide_before_journal
    -> journal the answer and one decision per call (one statement) -> after_decide

Nothing is journaled until the whole answer checks out: an unknown tool or arguments its
schema refuses is a :class:`~agent_runtime.errors.ModelError` and the run stays resumable.
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

from .agent import Agent
from .backoff import uniform
from .config import Settings
from .conversation import DONE, Question
from .crash import CrashPlan
from .errors import ConfigError, InvalidArguments, UnknownTool
from .journal import Journal
from .models import Answer, ChatModel, DecideModel, Model
from .records import Decision, History, Lease, ModelAnswer
from .tooldef import Tool

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
        answer = self.model_for(agent).ask(question)
        checked = checked_answer(answer, tools)
        self.crash.reached("after_decide_before_journal", seq)
        made = self.journal.record_answer(
            lease, seq, [c[:3] for c in checked], message=answer.message, usage=answer.usage
        )
        for decision, (*_, typed) in zip(made, checked, strict=True):
            if typed is not None:
                self.typed[lease.run_id, decision.seq] = (decision, typed)
            history.answers.setdefault(decision.llm_call, _answer_record(decision, answer))
            log.info(
                "decided run=%s seq=%d tool=%s args=%s llm_calls=%d",
                lease.run_id,
                decision.seq,
                decision.tool,
                _args(decision.args),
                decision.llm_call,
            )
        self.crash.reached("after_decide", seq)
        return made


def raise_missing_model(agent: Agent) -> None:
    raise ConfigError(
        f"agent {agent.name!r} speaks Chat Completions but names no model: set MODEL_NAME "
        "or the agent's model"
    )


def checked_calls(
    answer: Answer, tools: Mapping[str, Tool]
) -> list[tuple[str, dict[str, Any], str | None]]:
    """The answer's calls as (tool, validated args, call id), or the error saying which
    call is wrong: an unknown tool, or arguments its schema refuses. Nothing is journaled."""
    return [c[:3] for c in checked_answer(answer, tools)]


Checked = tuple[str, dict[str, Any], str | None, dict[str, Any] | None]


def checked_answer(answer: Answer, tools: Mapping[str, Tool]) -> list[Checked]:
    """:func:`checked_calls`, each with its arguments as typed (None for ``done``): one
    validation per call, shared by the journal and the attempts."""
    decided: list[Checked] = []
    for proposed in answer.calls:
        if proposed.tool == DONE:
            if proposed.args not in (None, {}):
                raise InvalidArguments(f"{DONE!r} takes no arguments, got {proposed.args!r:.200}")
            decided.append((DONE, {}, proposed.call_id, None))
            continue
        tool = tools.get(proposed.tool)
        if tool is None:
            raise UnknownTool(
                f"the model chose tool {proposed.tool!r}, which does not exist; known tools: "
                f"{', '.join(sorted(tools))}, or a final answer"
            )
        as_json, typed = tool.checked(proposed.args)
        decided.append((tool.name, as_json, proposed.call_id, typed))
    return decided


def _answer_record(decision: Decision, answer: Answer) -> ModelAnswer:
    return ModelAnswer(
        llm_call=decision.llm_call,
        message=answer.message,
        usage=answer.usage,
        generation=decision.generation,
        answered_at=decision.decided_at,
    )
