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

The messages are built once: a :class:`Transcript` kept with the worker's history holds
every settled answer's messages and their JSON, so a question at step 300 makes and
encodes only what step 299 added (a restart builds its transcript once, from the history
it read).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Final, Self

from agent_runtime.store.records import Decision, History
from agent_runtime.tools.tooldef import Tool

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
    return [*opening(question), *replayed(question.history)]


def opening(question: Question) -> list[dict[str, Any]]:
    """The messages before the first answer: the instructions, the run's input."""
    messages: list[dict[str, Any]] = []
    if question.instructions:
        messages.append({"role": "system", "content": question.instructions})
    messages.append({"role": "user", "content": question.input or ""})
    return messages


def replayed(history: History) -> list[dict[str, Any]]:
    """Every answer of the run so far and the results of its calls, as messages."""
    transcript = Transcript.of(history)
    return [*transcript.messages, *(message for message, _ in transcript.update(history))]


def encoded(message: dict[str, Any]) -> bytes:
    """One message as the request body carries it (compact JSON, UTF-8)."""
    return json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode()


class _Kept:
    """Encodings made once for one history (``History.memo``): those of its settled part,
    comma-separated as inside a JSON array, and the first step after them."""

    KEY: ClassVar[str]

    def __init__(self) -> None:
        self.data = bytearray()
        self.next_seq = 0  # the first step not kept

    @classmethod
    def of(cls, history: History) -> Self:
        found = history.memo.get(cls.KEY)
        if isinstance(found, cls):
            return found
        made = cls()
        history.memo[cls.KEY] = made
        return made

    def _keep(self, data: bytes) -> None:
        self.data += b"," + data if self.data else data

    def _joined(self, fresh: list[bytes]) -> bytes:
        pieces: list[bytes | bytearray] = [self.data, *fresh] if self.data else [*fresh]
        return b",".join(pieces)


class Transcript(_Kept):
    """The messages of a run's answers, each made and encoded once.

    It lives with the :class:`~agent_runtime.store.records.History` it was made from
    (``History.memo``), so a step adds only its own answer and results: the worker's
    history only grows at its end, and an answer is kept once every call of it is settled
    (confirmed, failed, or the final answer). What is not settled yet is made afresh on
    every question. A restart reads a new history, and with it a new transcript.
    """

    KEY = "chat.transcript"

    def __init__(self) -> None:
        super().__init__()
        self.messages: list[dict[str, Any]] = []  # the kept answers' messages

    def update(self, history: History) -> list[tuple[dict[str, Any], bytes]]:
        """Keep every newly settled answer of ``history`` (this transcript's own); the
        messages after the kept ones that are not settled yet, with their encodings."""
        decisions = history.decisions
        fresh: list[tuple[dict[str, Any], bytes]] = []
        seq = self.next_seq
        while seq in decisions:
            llm_call = decisions[seq].llm_call
            answer: list[Decision] = []
            while seq in decisions and decisions[seq].llm_call == llm_call:
                answer.append(decisions[seq])
                seq += 1
            made = [(m, encoded(m)) for m in _answer_messages(history, answer)]
            if fresh or not all(_settled(history, d) for d in answer):
                fresh += made
                continue
            for message, data in made:
                self.messages.append(message)
                self._keep(data)
            self.next_seq = seq
        return fresh

    def json(self, history: History) -> bytes:
        """The messages of :meth:`update` (kept and fresh) as the inside of a JSON array."""
        return self._joined([data for _, data in self.update(history)])


class Steps(_Kept):
    """The seed's protocol's history (``History.confirmed_steps``: every resolved call,
    failed ones with their error), each step encoded once:
    the same growth rule as :class:`Transcript`, for ``POST /v1/decide``."""

    KEY = "decide.steps"

    def json(self, history: History) -> bytes:
        """The confirmed steps, in step order, as the inside of a JSON array."""
        fresh: list[bytes] = []
        stuck = False  # a step not settled yet: it and every later one are made afresh
        seq = self.next_seq
        while seq in history.decisions:
            step = _step(history, seq)
            stuck = stuck or not _settled(history, history.decisions[seq])
            if stuck:
                fresh += [] if step is None else [step]
            else:
                if step is not None:
                    self._keep(step)
                self.next_seq = seq + 1
            seq += 1
        return self._joined(fresh)


def _step(history: History, seq: int) -> bytes | None:
    """A resolved call as a step; a failed one (the tool failed, or the runtime refused
    the model's call) carries the error as its result, as a Chat Completions tool message
    would."""
    call = history.calls.get(seq)
    if call is None or not call.confirmed:
        return None
    d = history.decisions[seq]
    return encoded({"seq": seq, "tool": d.tool, "args": d.args, "result": call.result})


def _settled(history: History, decision: Decision) -> bool:
    call = history.calls.get(decision.seq)
    return decision.tool == DONE or (call is not None and call.confirmed)


def _answer_messages(history: History, decisions: list[Decision]) -> list[dict[str, Any]]:
    """One answer (its decisions, in step order) as the assistant message and one tool
    message per resolved call (a tool that answered nothing is answered ``null``: a
    Chat Completions server refuses a tool call left without its message)."""
    answer = history.answers.get(decisions[0].llm_call)
    message = answer.message if answer is not None else None
    if message is None or message.get("role") != "assistant":
        message = _assistant(decisions)
    messages = [message]
    for decision in decisions:
        call = history.calls.get(decision.seq)
        if decision.tool == DONE or call is None or not call.confirmed:
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
