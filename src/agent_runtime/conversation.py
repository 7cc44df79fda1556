"""A run's conversation with its model, rebuilt from the journal.

The journal keeps every model answer whole (``model_answers``: the assistant message with
its tool call ids, and the token usage), every decision it led to, and every call's
confirmed result. So the messages of the next Chat Completions request are the run's
actual history, in order, whatever crashed and restarted in between::

    system     the agent's instructions
    user       the run's input (its task)
    assistant  answer 1, with its tool calls (ids as the model gave them)
    tool       the result of each of its calls, by tool_call_id
    assistant  answer 2 ...

A decision journaled without its answer (by the seed's own protocol, or before answers
were kept) becomes an assistant message made from the decision itself, with the call id
``call_<seq>``, so every run can be continued over Chat Completions.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from .records import Decision, History
from .tooldef import Tool

DONE: Final = "done"  # the tool name of a final answer: the model proposed no call


@dataclass(frozen=True, kw_only=True)
class Question:
    """What a model is asked with: the run, its task, its history, the tools it may call."""

    run_id: str
    input: str | None
    instructions: str
    history: History
    tools: Sequence[Tool]


def call_id(decision: Decision) -> str:
    """The id the model gave this call, or one made from its step."""
    return decision.call_id or f"call_{decision.seq}"


def messages_of(question: Question) -> list[dict[str, Any]]:
    """The Chat Completions messages for the next answer of ``question``'s run."""
    messages: list[dict[str, Any]] = []
    if question.instructions:
        messages.append({"role": "system", "content": question.instructions})
    messages.append({"role": "user", "content": question.input or ""})
    messages += replayed(question.history)
    return messages


def replayed(history: History) -> list[dict[str, Any]]:
    """Every answer of the run so far and the results of its calls, as messages."""
    by_answer: dict[int, list[Decision]] = defaultdict(list)
    for seq in sorted(history.decisions):
        decision = history.decisions[seq]
        by_answer[decision.llm_call].append(decision)
    messages: list[dict[str, Any]] = []
    for llm_call in sorted(by_answer):
        decisions = by_answer[llm_call]
        answer = history.answers.get(llm_call)
        message = answer.message if answer is not None else None
        if message is None or message.get("role") != "assistant":
            message = _assistant(decisions)
        messages.append(message)
        for decision in decisions:
            call = history.calls.get(decision.seq)
            if decision.tool == DONE or call is None or call.result is None:
                continue
            messages.append(
                {
                    "role": "tool",
                    "tool_call_id": call_id(decision),
                    "content": json.dumps(call.result, sort_keys=True),
                }
            )
    return messages


def _assistant(decisions: list[Decision]) -> dict[str, Any]:
    calls = [
        {
            "id": call_id(d),
            "type": "function",
            "function": {"name": d.tool, "arguments": json.dumps(d.args, sort_keys=True)},
        }
        for d in decisions
        if d.tool != DONE
    ]
    return {"role": "assistant", "content": None, **({"tool_calls": calls} if calls else {})}
