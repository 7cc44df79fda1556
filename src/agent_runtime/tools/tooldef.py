"""Tools as users define them: a Python function, its arguments, and its effect contract.

::

    from agent_runtime import Call, Result, tool

    @tool(effect="keyed")
    def file_ticket(call: Call, order_id: str, summary: str) -> dict[str, object]:
        \"\"\"File a support ticket about an order.\"\"\"
        answer = http.post("/v1/tickets", json={...}, headers=call.headers())
        return Result(answer.json(), status=answer.json()["status"])

The first parameter receives the :class:`Call` (run, step, idempotency key, fencing
generation); the others are the tool's arguments. Their type hints become the JSON Schema
the model is shown, and the arguments a model proposes are validated against them (by
pydantic) before the decision is journaled and again before the intent is written. The
journal keeps them as JSON; the function receives them as the types its hints name.

The **effect contract** says what a restart may do with a call whose intent has no
confirm -- the runtime cannot know whether the first attempt acted:

========  =====================================================================
effect    on restart, and when a retryable exception ends an attempt
========  =====================================================================
keyed     call again under the same key: the remote honours it and answers the
          first result (``status="already_done"``)
checked   ask ``check(call, **args)`` first; act only if it finds no effect
read      call again: there is no effect
once      never call again: the run stops as *needs attention* and an operator
          decides (``resolve RUN --seq N --confirm JSON | --redo | --fail``)
========  =====================================================================

A request can outlive its sender: the remote may still act on it after the caller timed
out, died or retried. ``in_flight`` (seconds) is how long after an attempt is sent its
request may still act; by default the worker's ``tool_timeout`` plus ``in_flight_margin``
(``TOOL_TIMEOUT`` + ``IN_FLIGHT_MARGIN``, 10 + 5 s). Every attempt's start is journaled
with it, and a ``checked`` call is checked only once every earlier attempt is past its
bound (on the database clock): that bound is the one promise a checked remote must keep --
a request it has not acted on within ``in_flight`` seconds of being sent never acts. A tool
whose client waits longer than ``tool_timeout`` (its own timeout, retries of its own) must
declare a bound that covers them.

An exception listed in ``retry_on`` means "the effect may or may not have happened":
the call is retried by its contract (``once``: parked). Any other exception is a clear
failure of that call: it is recorded, and the model sees the error as the call's result.
An :class:`~agent_runtime.errors.AgentRuntimeError` a tool raises keeps its own meaning
(a fenced call, a permanent rejection).
"""

from __future__ import annotations

import copy
import functools
import inspect
import json
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal, get_args, overload

import httpx
import pydantic

from agent_runtime.clients import GENERATION_HEADER, KEY_HEADER, wire_key
from agent_runtime.errors import ConfigError, InvalidArguments

Effect = Literal["keyed", "checked", "read", "once"]
EFFECTS: Final[tuple[str, ...]] = get_args(Effect)
RETRY_ON: Final[tuple[type[BaseException], ...]] = (
    httpx.TransportError,  # includes timeouts: the remote may have acted
    ConnectionError,
    TimeoutError,
)
RETRIES: Final = 3  # extra attempts after a retryable exception
BACKOFF: Final = 0.2  # seconds before the first retry, doubled each time


@dataclass(frozen=True, kw_only=True)
class Call:
    """Who makes a tool call, and under which idempotency key."""

    run_id: str
    seq: int  # the step: one per tool call, numbered from 0 across the run
    key: str  # '<run_id>:<seq>': the same on every attempt, in every worker
    generation: int  # the fencing generation of the worker making this attempt
    tool_call_id: str | None = None  # the model's own id of this call, if it gave one
    attempt: int = 1  # 1, then 2 for this worker's first retry, ...

    def headers(self) -> dict[str, str]:
        """``Idempotency-Key`` (percent-encoded where the run id is not ASCII) and
        ``X-Fencing-Generation``, for a keyed HTTP remote."""
        return {KEY_HEADER: wire_key(self.key), GENERATION_HEADER: str(self.generation)}


@dataclass(frozen=True)
class Result:
    """A tool's answer, and how it came about (``created``, or ``already_done`` when the
    remote recognised the key). A tool may also return the bare value."""

    value: Any
    status: str = "created"


Fn = Callable[..., Any]
Check = Callable[..., Any]


@dataclass(eq=False, kw_only=True)
class Tool:
    """One tool an agent may call; make it with :func:`tool`."""

    name: str
    description: str
    effect: Effect
    fn: Fn
    arguments: type[pydantic.BaseModel]
    retry_on: tuple[type[BaseException], ...] = RETRY_ON
    retries: int = RETRIES
    backoff: float = BACKOFF
    in_flight: float | None = None  # seconds a request may still act after it was sent
    # (None: the worker's tool_timeout + in_flight_margin)
    checker: Check | None = field(default=None)

    def check(self, fn: Check) -> Check:
        """Decorate the function that tells whether a call's effect exists (``checked``):
        ``check(call, **args)`` returns the effect's result, or None when there is none."""
        if self.effect != "checked":
            raise ConfigError(
                f"tool {self.name!r} is {self.effect!r}; only a checked tool has check"
            )
        self.checker = fn
        return fn

    @property
    def parameters(self) -> dict[str, Any]:
        """The arguments' JSON Schema (a fresh copy: the caller may change it)."""
        return copy.deepcopy(_schema_of(self.arguments))

    def spec(self) -> dict[str, Any]:
        """The tool as the Chat Completions API describes one."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.parameters,
            },
        }

    def validate(self, args: object) -> dict[str, Any]:
        """``args`` checked against the schema, or :class:`InvalidArguments` saying why."""
        return self.checked(args)[0]

    def checked(self, args: object) -> tuple[dict[str, Any], dict[str, Any]]:
        """``args`` checked once: (as JSON, what the journal keeps; as the types the hints
        name, what :meth:`invoke` passes), or :class:`InvalidArguments` saying why."""
        if not isinstance(args, Mapping):
            raise InvalidArguments(f"{self.name}: arguments must be an object, got {args!r:.200}")
        model = self._model_of(args)
        as_json: dict[str, Any] = model.model_dump(mode="json")
        return as_json, {name: getattr(model, name) for name in type(model).model_fields}

    def _typed(self, args: Mapping[str, Any]) -> dict[str, Any]:
        """Validated ``args`` as the types the hints name (an enum member, not its value)."""
        model = self._model_of(args)
        return {name: getattr(model, name) for name in type(model).model_fields}

    def _model_of(self, args: Mapping[str, Any]) -> pydantic.BaseModel:
        # As JSON, which is what a model sends and the journal keeps: strict, yet an enum
        # member is its value and a datetime its ISO text, as the schema tells the model.
        try:
            text = json.dumps(dict(args))
        except (TypeError, ValueError) as exc:
            raise InvalidArguments(f"{self.name}: arguments are not JSON ({exc})") from None
        try:
            return self.arguments.model_validate_json(text)
        except pydantic.ValidationError as exc:
            raise InvalidArguments(f"{self.name}: {_explain(exc)}") from None

    def __call__(self, call: Call, args: Mapping[str, Any]) -> Result:
        """One attempt; the answer as a :class:`Result` (a bare value means ``created``)."""
        return self.invoke(call, self._typed(args))

    def look(self, call: Call, args: Mapping[str, Any]) -> Result | None:
        """A checked tool's check: the effect's result if it exists (status ``found``)."""
        return self.look_typed(call, self._typed(args))

    def invoke(self, call: Call, typed: Mapping[str, Any]) -> Result:
        """One attempt with arguments already :meth:`checked` (their typed half)."""
        answer = self.fn(call, **typed)
        return _as_result(self, answer, "read" if self.effect == "read" else "created")

    def look_typed(self, call: Call, typed: Mapping[str, Any]) -> Result | None:
        """:meth:`look` with arguments already :meth:`checked` (their typed half)."""
        if self.checker is None:
            raise ConfigError(f"checked tool {self.name!r} has no check; decorate one with .check")
        found = self.checker(call, **typed)
        return None if found is None else _as_result(self, found, "found")


@overload
def tool(
    fn: Fn,
    *,
    effect: Effect,
    name: str | None = None,
    description: str | None = None,
    retry_on: tuple[type[BaseException], ...] = RETRY_ON,
    retries: int = RETRIES,
    backoff: float = BACKOFF,
    in_flight: float | None = None,
) -> Tool: ...


@overload
def tool(
    fn: None = None,
    *,
    effect: Effect,
    name: str | None = None,
    description: str | None = None,
    retry_on: tuple[type[BaseException], ...] = RETRY_ON,
    retries: int = RETRIES,
    backoff: float = BACKOFF,
    in_flight: float | None = None,
) -> Callable[[Fn], Tool]: ...


def tool(
    fn: Fn | None = None,
    *,
    effect: Effect,
    name: str | None = None,
    description: str | None = None,
    retry_on: tuple[type[BaseException], ...] = RETRY_ON,
    retries: int = RETRIES,
    backoff: float = BACKOFF,
    in_flight: float | None = None,
) -> Tool | Callable[[Fn], Tool]:
    """Make a :class:`Tool` of ``fn``: ``@tool(effect="keyed")`` above a function.

    ``in_flight``: seconds after an attempt is sent during which its request may still act
    at the remote (default: the worker's tool timeout plus its in-flight margin); a
    ``checked`` call is never checked before every earlier attempt is past it."""
    if effect not in EFFECTS:
        raise ConfigError(f"effect must be one of {', '.join(EFFECTS)}, got {effect!r}")
    if retries < 0 or backoff < 0:
        raise ConfigError("retries and backoff must be >= 0")
    if in_flight is not None and not (in_flight >= 0 and in_flight < float("inf")):
        raise ConfigError(f"in_flight must be a finite number of seconds >= 0, got {in_flight}")

    def make(fn: Fn) -> Tool:
        tool_name = name or fn.__name__
        return Tool(
            name=tool_name,
            description=description or inspect.getdoc(fn) or tool_name,
            effect=effect,
            fn=fn,
            arguments=_arguments_model(tool_name, fn),
            retry_on=retry_on,
            retries=retries,
            backoff=backoff,
            in_flight=in_flight,
        )

    return make(fn) if fn is not None else make


@functools.cache
def _schema_of(model: type[pydantic.BaseModel]) -> dict[str, Any]:
    """The JSON Schema of an arguments model, made once per model (pydantic rebuilds it on
    every ``model_json_schema()``, and a model is shown the tools at every step)."""
    schema: dict[str, Any] = model.model_json_schema()
    schema.pop("title", None)
    return schema


# Arguments models by what they are made of. Agents build their tools per worker (closures
# over the worker's clients), so one function's code comes back with every worker; building
# its pydantic model again each time would cost more than a step's journal writes.
_MODELS: dict[Hashable, type[pydantic.BaseModel]] = {}


def _arguments_model(name: str, fn: Fn) -> type[pydantic.BaseModel]:
    """A pydantic model of every parameter after the first (the :class:`Call`)."""
    try:
        hints = inspect.get_annotations(fn, eval_str=True)
    except (NameError, AttributeError, SyntaxError, TypeError) as exc:
        raise ConfigError(f"tool {name!r}: a type hint cannot be resolved ({exc})") from exc
    code = getattr(fn, "__code__", None)
    key: Hashable | None = None
    if code is not None:
        kwdefaults = sorted((getattr(fn, "__kwdefaults__", None) or {}).items())
        key = (name, code, getattr(fn, "__defaults__", None), tuple(kwdefaults), *hints.items())
        try:
            found = _MODELS.get(key)
        except TypeError:  # an unhashable default or hint: build it every time
            key = None
        else:
            if found is not None:
                return found
    model = _build_arguments_model(name, fn, hints)
    if key is not None:
        _MODELS[key] = model
    return model


def _build_arguments_model(name: str, fn: Fn, hints: dict[str, Any]) -> type[pydantic.BaseModel]:
    params = list(inspect.signature(fn).parameters.values())
    first = params[0] if params else None
    if (
        first is None
        or first.kind not in (first.POSITIONAL_ONLY, first.POSITIONAL_OR_KEYWORD)
        or hints.get(first.name, Call) is not Call
    ):
        raise ConfigError(
            f"tool {name!r} must take the Call as its first parameter, then its arguments: "
            f"def {name}(call: Call, ...)"
        )
    fields: dict[str, Any] = {}
    for param in params[1:]:
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD, param.POSITIONAL_ONLY):
            raise ConfigError(f"tool {name!r}: parameter {param.name!r} must be a plain argument")
        if param.name not in hints:
            raise ConfigError(f"tool {name!r}: parameter {param.name!r} needs a type hint")
        default = ... if param.default is param.empty else param.default
        fields[param.name] = (hints[param.name], default)
    config = pydantic.ConfigDict(extra="forbid", strict=True)
    try:
        model: type[pydantic.BaseModel] = pydantic.create_model(
            f"{name}_arguments", __config__=config, **fields
        )
        _schema_of(model)  # now, not when the model is first shown the tool
    except pydantic.PydanticUserError as exc:
        raise ConfigError(_unusable(name, fields, exc)) from exc
    return model


def _unusable(name: str, fields: Mapping[str, Any], exc: pydantic.PydanticUserError) -> str:
    """Which parameter's type pydantic cannot validate or describe as JSON Schema."""
    for param, (hint, _) in fields.items():
        try:
            pydantic.TypeAdapter(hint).json_schema()
        except pydantic.PydanticUserError:
            return (
                f"tool {name!r}: parameter {param!r} is hinted {hint!r}, which cannot be an "
                "argument (a model sends JSON: use str, int, float, bool, Literal, an Enum, "
                "a list or dict of those, or a pydantic model)"
            )
    return f"tool {name!r}: its parameters cannot be arguments ({exc})"


def _explain(exc: pydantic.ValidationError) -> str:
    parts = []
    for error in exc.errors(include_url=False):
        where = ".".join(str(p) for p in error["loc"]) or "arguments"
        got = error.get("input")
        shown = "" if error["type"] == "missing" else f" (got {got!r:.80})"
        parts.append(f"{where}: {error['msg']}{shown}")
    return "; ".join(parts)


def _as_result(tool: Tool, answer: Any, default_status: str) -> Result:
    result = answer if isinstance(answer, Result) else Result(answer, default_status)
    try:
        json.dumps(result.value)
    except (TypeError, ValueError) as exc:
        raise TypeError(
            f"tool {tool.name!r} returned {type(result.value).__name__}, which is not JSON: {exc}"
        ) from exc
    return result
