"""The tools an agent may call, and the checks on their arguments.

Each tool is one cloud endpoint. A model answer is checked against this table
before it is journaled, and the journaled arguments are checked again before
the call is written down (``before_intent``), so a decision recorded by an older
version of the runtime cannot send a request this version considers invalid.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .errors import InvalidArguments, MalformedAnswer, UnknownTool

DONE = "done"  # the model's answer when the run has nothing left to do


@dataclass(frozen=True, kw_only=True)
class Tool:
    name: str
    path: str  # cloud endpoint
    fields: Mapping[str, tuple[str, ...] | None]  # field -> allowed values (None: any text)


TOOLS: Mapping[str, Tool] = {
    t.name: t
    for t in (
        Tool(
            name="create_server",
            path="/v1/servers",
            fields={"name": None, "size": ("small", "medium", "large"), "region": None},
        ),
        Tool(
            name="create_database",
            path="/v1/databases",
            fields={"name": None, "engine": ("postgres", "mysql"), "server_id": None},
        ),
        Tool(
            name="create_dns_record",
            path="/v1/dns_records",
            fields={"name": None, "type": ("A", "CNAME"), "value": None},
        ),
    )
}

MAX_TEXT = 200  # characters in one argument


def lookup(name: str) -> Tool:
    try:
        return TOOLS[name]
    except KeyError:
        raise UnknownTool(
            f"the model chose tool {name!r}, which does not exist; known tools: "
            f"{', '.join(sorted(TOOLS))}, or {DONE!r}"
        ) from None


def check_args(tool: Tool, args: object) -> dict[str, str]:
    if not isinstance(args, dict):
        raise InvalidArguments(f"{tool.name}: arguments must be an object, got {args!r}")
    missing = sorted(set(tool.fields) - set(args))
    extra = sorted(set(args) - set(tool.fields))
    if missing or extra:
        raise InvalidArguments(
            f"{tool.name}: missing {missing or 'nothing'}, unexpected "
            f"{extra or 'nothing'} in {args!r}"
        )
    for field, allowed in tool.fields.items():
        value = args[field]
        if not isinstance(value, str) or not value or len(value) > MAX_TEXT:
            raise InvalidArguments(
                f"{tool.name}: {field} must be a non-empty string of at most {MAX_TEXT} "
                f"characters, got {value!r}"
            )
        if allowed is not None and value not in allowed:
            raise InvalidArguments(
                f"{tool.name}: {field}={value!r} is not one of {', '.join(allowed)}"
            )
    return {field: args[field] for field in tool.fields}


def parse_answer(answer: object) -> tuple[str, dict[str, Any]]:
    """A model answer as (tool, args), or a specific error saying what is wrong with it."""
    if not isinstance(answer, dict):
        raise MalformedAnswer(f"the model's answer is not a JSON object: {answer!r:.200}")
    tool = answer.get("tool")
    if not isinstance(tool, str) or not tool:
        raise MalformedAnswer(f"the model's answer has no tool name: {answer!r:.200}")
    if tool == DONE:
        if answer.get("args") not in (None, {}):
            raise InvalidArguments(f"{DONE!r} takes no arguments, got {answer.get('args')!r:.200}")
        return DONE, {}
    args = check_args(lookup(tool), answer.get("args"))
    return tool, dict(args)
