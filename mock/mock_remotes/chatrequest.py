"""Reading a Chat Completions request: the run, the plan, the conversation, the tools.

`parse_chat` turns a `POST /v1/chat/completions` body into a `ChatRequest` or
raises `ChatError` (the OpenAI error shape). It checks everything before the
model counts the call, so a refused request is never counted:

- the run: the body's `user` field, else the `X-Run-Id` header, else
  `DEFAULT_RUN`; both given and different is refused;
- the plan: `model` names one of `mock_remotes.plans.PLANS` (404 otherwise);
- `tools`: every tool the plan calls is offered as a function, and where the
  offer declares `parameters.properties`, the plan's arguments fit it;
- `messages`: the conversation. Every assistant tool call must be answered by
  one `role: tool` message (its `tool_call_id`) before the next user or
  assistant message; the answer's content is what the runtime confirmed, as
  JSON (any other text, and JSON that is not an object such as `null`, is read
  as `{"value": ...}`, as a real server takes any text). An object with an
  `"error"` key reports a failed call: the plan does not count that step as done;
- `tool_choice` (`auto`, `none`, `required`, or a named function) and
  `parallel_tool_calls` shape the plan's next move.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from mock_remotes.errors import ChatInvalidRequest, ChatModelNotFound, InvalidRequest
from mock_remotes.plans import PLANS, Context, Move, Plan, Step, Turn

__all__ = ["DEFAULT_RUN", "RUN_HEADER", "ChatRequest", "parse_chat"]

RUN_HEADER: Final = "X-Run-Id"
DEFAULT_RUN: Final = "default"  # the run of a request that names none
TOOL_NAME: Final = re.compile(r"[A-Za-z0-9_-]{1,64}")  # OpenAI's rule for function names
ROLES: Final = ("system", "developer", "user", "assistant", "tool")


@dataclass(frozen=True, kw_only=True)
class ChatRequest:
    """A Chat Completions request the model can answer, and its plan's next move."""

    run_id: str
    model: str
    plan: Plan
    move: Move
    offered: tuple[str, ...]  # the function names in `tools`
    prompt_chars: int  # size of messages + tools, for the usage estimate


def _refuse(message: str, param: str | None, reason: str = "invalid_value") -> ChatInvalidRequest:
    return ChatInvalidRequest(message, param=param, reason=reason)


def _run_id(body: Mapping[str, Any], header: str | None) -> str:
    user = body.get("user")
    if user is not None and not isinstance(user, str):
        raise _refuse("user must be a string: the run's id", "user", "invalid_type")
    named = (header or "").strip()
    if user and named and user != named:
        raise _refuse(
            f"user {user!r} and the {RUN_HEADER} header {named!r} name different runs; "
            "send one of them",
            "user",
        )
    return user or named or DEFAULT_RUN


def _plan(body: Mapping[str, Any]) -> Plan:
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise _refuse("model must be a non-empty string", "model", "missing_required_parameter")
    plan = PLANS.get(model)
    if plan is None:
        known = ", ".join(PLANS)
        raise ChatModelNotFound(
            f"the model {model!r} does not exist; the mock serves {known}",
            param="model",
            reason="model_not_found",
        )
    return plan


def _tools(body: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    """The offered functions by name (each `{"name", "description", "parameters"}`)."""
    tools = body.get("tools", [])
    if not isinstance(tools, list):
        raise _refuse("tools must be a list of functions", "tools", "invalid_type")
    offered: dict[str, Mapping[str, Any]] = {}
    for i, tool in enumerate(tools):
        where = f"tools[{i}]"
        if not isinstance(tool, dict) or tool.get("type") != "function":
            raise _refuse(f'{where} must be {{"type": "function", "function": {{...}}}}', where)
        function = tool.get("function")
        name = function.get("name") if isinstance(function, dict) else None
        if not isinstance(function, dict) or not isinstance(name, str):
            raise _refuse(f"{where}.function must be an object with a name", f"{where}.function")
        if not TOOL_NAME.fullmatch(name):
            raise _refuse(f"{where}.function.name must match [A-Za-z0-9_-]{{1,64}}", where)
        if name in offered:
            raise _refuse(f"{where}: the tool {name!r} is offered twice", where)
        if not isinstance(function.get("parameters", {}), dict):
            raise _refuse(f"{where}.function.parameters must be a JSON Schema object", where)
        offered[name] = function
    return offered


def _check_offered(plan: Plan, offered: Mapping[str, Mapping[str, Any]]) -> None:
    missing = [tool for tool in plan.tools if tool not in offered]
    if missing:
        raise _refuse(
            f"the {plan.model} plan calls {', '.join(plan.tools)}; "
            f"offer every one in tools (missing: {', '.join(missing)})",
            "tools",
            "tool_not_offered",
        )
    for tool, sent in plan.tools.items():
        parameters = offered[tool].get("parameters") or {}
        properties = parameters.get("properties")
        if not isinstance(properties, dict):
            continue  # nothing declared, nothing to compare
        undeclared = [arg for arg in sent if arg not in properties]
        required = parameters.get("required", [])
        unsent = [arg for arg in required if arg not in sent] if isinstance(required, list) else []
        if undeclared or unsent:
            raise _refuse(
                f"the {plan.model} plan calls {tool} with exactly {', '.join(sent)}; its "
                f"parameters do not declare {', '.join(undeclared) or '-'} and require "
                f"{', '.join(map(str, unsent)) or '-'} besides",
                "tools",
                "tool_schema_mismatch",
            )


def _text(content: object, where: str) -> str:
    """A message's text: a string, null, or a list of `{"type": "text", "text"}` parts."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = [part.get("text") for part in content if isinstance(part, dict)]
        return "\n".join(text for text in texts if isinstance(text, str))
    raise _refuse(f"{where}.content must be a string or a list of parts", f"{where}.content")


def _result(content: object, where: str) -> dict[str, Any]:
    """A tool message's content as the plans read it: a JSON object as it is; anything
    else a real server takes too (``null``, a number, plain text) under ``"value"``."""
    text = _text(content, where)
    try:
        result = json.loads(text)
    except ValueError:
        return {"value": text}
    return result if isinstance(result, dict) else {"value": result}


def _arguments(raw: object) -> dict[str, Any]:
    """A past call's arguments; the plans never read them, so bad JSON is kept as {}."""
    try:
        args = json.loads(raw) if isinstance(raw, str) else None
    except ValueError:
        return {}
    return args if isinstance(args, dict) else {}


@dataclass
class _Reading:
    """The conversation read so far."""

    calls: dict[str, tuple[int, str, dict[str, Any]]]  # every tool call id -> (seq, tool, args)
    pending: list[str]  # ids asked, not yet answered
    done: list[Step]
    failed: list[Step]
    user_texts: list[str]

    def unanswered(self, where: str) -> ChatInvalidRequest:
        ids = ", ".join(self.pending)
        return _refuse(
            "an assistant message with tool_calls must be followed by one tool message per "
            f"tool_call_id before {where}; not answered: {ids}",
            "messages",
        )


def _assistant(reading: _Reading, message: Mapping[str, Any], where: str) -> None:
    calls = message.get("tool_calls") or []
    if not isinstance(calls, list):
        raise _refuse(f"{where}.tool_calls must be a list", f"{where}.tool_calls", "invalid_type")
    for j, call in enumerate(calls):
        at = f"{where}.tool_calls[{j}]"
        function = call.get("function") if isinstance(call, dict) else None
        call_id = call.get("id") if isinstance(call, dict) else None
        if not isinstance(function, dict) or not isinstance(call_id, str) or not call_id:
            raise _refuse(f'{at} must be {{"id", "type": "function", "function": {{"name"}}}}', at)
        name = function.get("name")
        if not isinstance(name, str):
            raise _refuse(f"{at}.function.name must be a string", f"{at}.function.name")
        if call_id in reading.calls:
            raise _refuse(f"{at}: the tool call id {call_id!r} is used twice", f"{at}.id")
        reading.calls[call_id] = (len(reading.calls), name, _arguments(function.get("arguments")))
        reading.pending.append(call_id)


def _tool(reading: _Reading, message: Mapping[str, Any], where: str) -> None:
    call_id = message.get("tool_call_id")
    if call_id not in reading.pending:
        raise _refuse(
            f"{where}: a tool message must answer a tool call of an earlier assistant "
            f"message, once; {call_id!r} is not waiting for an answer",
            f"{where}.tool_call_id",
        )
    reading.pending.remove(call_id)
    seq, tool, args = reading.calls[call_id]
    step = Step(seq=seq, tool=tool, args=args, result=_result(message.get("content"), where))
    (reading.failed if "error" in step.result else reading.done).append(step)


def _conversation(body: Mapping[str, Any]) -> _Reading:
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise _refuse("messages must be a non-empty list", "messages", "missing_required_parameter")
    reading = _Reading(calls={}, pending=[], done=[], failed=[], user_texts=[])
    for i, message in enumerate(messages):
        where = f"messages[{i}]"
        role = message.get("role") if isinstance(message, dict) else None
        if not isinstance(message, dict) or role not in ROLES:
            raise _refuse(f"{where}.role must be one of {', '.join(ROLES)}", f"{where}.role")
        if role == "tool":
            _tool(reading, message, where)
            continue
        if reading.pending:
            raise reading.unanswered(where)
        if role == "assistant":
            _assistant(reading, message, where)
        elif role == "user":
            reading.user_texts.append(_text(message.get("content"), where))
    if reading.pending:
        raise reading.unanswered("the next answer")
    reading.done.sort(key=lambda step: step.seq)
    return reading


def _chosen(move: Move, choice: object, offered: Sequence[str]) -> Move:
    """`move` as `tool_choice` allows it."""
    if choice is None or choice == "auto":
        return move
    if choice == "none":
        if not move.tools:
            return move
        wanted = ", ".join(move.tools)
        return Move(
            tools=(),
            render=lambda n: Turn(text=f"I would call {wanted} next (#{n}); tool_choice is none."),
        )
    if choice == "required":
        if not move.tools:
            raise _refuse(
                "tool_choice is 'required' but the plan is finished: its next answer is text",
                "tool_choice",
            )
        return move
    function = choice.get("function") if isinstance(choice, dict) else None
    name = function.get("name") if isinstance(function, dict) else None
    if (
        not isinstance(choice, dict)
        or choice.get("type") != "function"
        or not isinstance(name, str)
    ):
        raise _refuse(
            'tool_choice must be "auto", "none", "required" or '
            '{"type": "function", "function": {"name": ...}}',
            "tool_choice",
        )
    if name not in offered:
        raise _refuse(f"tool_choice names {name!r}, which tools does not offer", "tool_choice")
    if name not in move.tools:
        nexts = ", ".join(move.tools) or "a final text"
        raise _refuse(
            f"tool_choice names {name!r}; the plan's next answer is {nexts}", "tool_choice"
        )

    def only(n: int) -> Turn:
        return Turn(calls=tuple(call for call in move.render(n).calls if call.name == name))

    return Move(tools=(name,), render=only)


def _options(body: Mapping[str, Any]) -> bool:
    """Refuse what the mock does not do; answer whether parallel tool calls are allowed."""
    if body.get("stream"):
        raise _refuse(
            "the mock model does not stream; send stream: false", "stream", "unsupported_value"
        )
    n = body.get("n", 1)
    if n not in (1, None) or isinstance(n, bool):
        raise _refuse("the mock model answers one choice; send n: 1", "n", "unsupported_value")
    parallel = body.get("parallel_tool_calls", True)
    if parallel is None:
        return True
    if not isinstance(parallel, bool):
        raise _refuse(
            "parallel_tool_calls must be a boolean", "parallel_tool_calls", "invalid_type"
        )
    return parallel


def parse_chat(body: object, *, run_header: str | None = None) -> ChatRequest:
    """A `ChatRequest` from a request body (and its `X-Run-Id` header), else `ChatError`."""
    if not isinstance(body, dict):
        raise _refuse("the body must be a JSON object", None, "invalid_type")
    run_id = _run_id(body, run_header)
    plan = _plan(body)
    parallel = _options(body)
    offered = _tools(body)
    _check_offered(plan, offered)
    reading = _conversation(body)
    context = Context(
        history=reading.done,
        failed=reading.failed,
        user_texts=reading.user_texts,
        parallel=plan.parallel and parallel,
    )
    try:
        move = plan.next(context)
    except InvalidRequest as exc:
        raise _refuse(f"{exc}: a tool message's content lacks it", "messages") from exc
    chars = len(json.dumps(body.get("messages"))) + len(json.dumps(body.get("tools", [])))
    return ChatRequest(
        run_id=run_id,
        model=plan.model,
        plan=plan,
        move=_chosen(move, body.get("tool_choice"), tuple(offered)),
        offered=tuple(offered),
        prompt_chars=chars,
    )
