"""Answering in the OpenAI Chat Completions wire format, faults included.

A healthy answer::

    {"id": "chatcmpl-<run digest>-<n>", "object": "chat.completion", "created": <unix s>,
     "model": <as asked>, "choices": [{"index": 0, "message": {"role": "assistant",
     "content": null, "refusal": null, "tool_calls": [{"id": "call_<n>_<i>_<run digest>",
     "type": "function", "function": {"name": ..., "arguments": "<JSON string>"}}]},
     "finish_reason": "tool_calls"}], "usage": {"prompt_tokens", "completion_tokens",
     "total_tokens"}}

or, for a final answer, `"content": <text>` without `tool_calls` and
`"finish_reason": "stop"`. Ids derive from the run and its call count only, so
the same call of the same run always answers the same ids. Token counts are an
estimate: characters / 4, at least 1.

Faults (`ModelFaults`), taken in this order when several are armed:

- `malformed`: 200 with a body that is not a usable completion, in turn:
  truncated JSON, JSON without `choices`, tool call arguments that are not JSON
  (a final answer has no arguments to break: `choices` is empty instead);
- `unknown_tool`: one call of a function `tools` does not offer (`delete_everything`);
- `invalid_args`: the plan's first call with arguments against the tool's schema
  (`Plan.spoil`); a final answer becomes a call of the plan's first tool with `{}`.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any, Final, Literal

from mock_remotes.chatrequest import ChatRequest
from mock_remotes.plans import PLANS, ToolCall, Turn

__all__ = ["Fault", "RawAnswer", "call_id", "completion", "models"]

Fault = Literal["malformed", "unknown_tool", "invalid_args"]
UNKNOWN_TOOL: Final = "delete_everything"
CHARS_PER_TOKEN = 4  # the usage estimate


@dataclass(frozen=True)
class RawAnswer:
    """An answer body that is not JSON at all (a malformed fault)."""

    text: str


def _digest(run_id: str) -> str:
    return hashlib.sha256(run_id.encode()).hexdigest()[:12]


def call_id(run_id: str, n: int, index: int) -> str:
    """The id of tool call `index` of call `n` of `run_id`: unique and reproducible."""
    return f"call_{n}_{index}_{_digest(run_id)}"


def _tokens(chars: int) -> int:
    return max(1, chars // CHARS_PER_TOKEN)


def _message(turn: Turn, run_id: str, n: int) -> dict[str, Any]:
    if not turn.calls:
        return {"role": "assistant", "content": turn.text or "", "refusal": None}
    calls = [
        {
            "id": call_id(run_id, n, index),
            "type": "function",
            "function": {"name": call.name, "arguments": json.dumps(call.args)},
        }
        for index, call in enumerate(turn.calls)
    ]
    return {"role": "assistant", "content": None, "refusal": None, "tool_calls": calls}


def _envelope(request: ChatRequest, n: int, created: int, turn: Turn) -> dict[str, Any]:
    message = _message(turn, request.run_id, n)
    completion_tokens = _tokens(len(json.dumps(message)))
    prompt_tokens = _tokens(request.prompt_chars)
    return {
        "id": f"chatcmpl-{_digest(request.run_id)}-{n}",
        "object": "chat.completion",
        "created": created,
        "model": request.model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "logprobs": None,
                "finish_reason": "tool_calls" if turn.calls else "stop",
            }
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


def _not_offered(offered: tuple[str, ...]) -> str:
    name = UNKNOWN_TOOL
    while name in offered:
        name += "_too"
    return name


def _spoiled_turn(request: ChatRequest, turn: Turn, fault: Fault, served: int) -> Turn:
    if fault == "unknown_tool":
        return Turn(calls=(ToolCall(name=_not_offered(request.offered), args={}),))
    if not turn.calls:  # invalid_args on a final answer
        return Turn(calls=(ToolCall(name=next(iter(request.plan.tools)), args={}),))
    if served % 2 == 0 and len(turn.calls) > 1:  # every other time, the last of several
        *before, last = turn.calls
        return Turn(calls=(*before, request.plan.spoil(last, served)))
    first = request.plan.spoil(turn.calls[0], served)
    return Turn(calls=(first, *turn.calls[1:]))


def _malformed(body: dict[str, Any], served: int) -> dict[str, Any] | RawAnswer:
    flavour = served % 3
    if flavour == 0:
        text = json.dumps(body)
        return RawAnswer(text[: len(text) // 2])
    if flavour == 1:
        return {key: value for key, value in body.items() if key != "choices"}
    message = body["choices"][0]["message"]
    if "tool_calls" not in message:
        return {**body, "choices": []}
    function = message["tool_calls"][0]["function"]
    function["arguments"] = function["arguments"][:-1]  # the closing brace is lost
    return body


def completion(
    request: ChatRequest,
    n: int,
    *,
    fault: Fault | None,
    served: int,
    created: int,
) -> dict[str, Any] | RawAnswer:
    """The body answering `request` at call `n`, spoiled by `fault` if one was taken."""
    turn = request.move.render(n)
    if fault == "malformed":
        return _malformed(_envelope(request, n, created, turn), served)
    if fault is not None:
        turn = _spoiled_turn(request, turn, fault, served)
    return _envelope(request, n, created, turn)


def models() -> dict[str, Any]:
    """The body of `GET /v1/models`: one entry per plan."""
    return {
        "object": "list",
        "data": [
            {"id": name, "object": "model", "created": 0, "owned_by": "mock_remotes"}
            for name in PLANS
        ],
    }
