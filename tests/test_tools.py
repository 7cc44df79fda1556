"""Model answers are checked against the agent's tools before anything is journaled."""

from __future__ import annotations

from typing import Any

import pytest

from agent_runtime.config import Settings
from agent_runtime.errors import InvalidArguments, MalformedAnswer, UnknownTool
from agent_runtime.llm.conversation import DONE
from agent_runtime.llm.deciding import checked_calls
from agent_runtime.llm.models import parse_decision
from agent_runtime.tools.agent import Wiring
from agent_runtime.tools.provisioning import agent

SERVER = {"name": "srv-1", "size": "small", "region": "local-1"}
TOOLS = agent.make_tools(Wiring(settings=Settings()))


def parse_answer(raw: object) -> tuple[str, dict[str, Any]]:
    """The seed protocol's answer, parsed and checked: its one (tool, args)."""
    ((tool, args, _),) = checked_calls(parse_decision(raw), TOOLS)
    return tool, args


def test_a_valid_answer_is_parsed_into_tool_and_arguments() -> None:
    assert parse_answer({"tool": "create_server", "args": SERVER}) == ("create_server", SERVER)
    assert parse_answer({"tool": "done", "args": {}}) == (DONE, {})
    assert parse_answer({"tool": "done"}) == (DONE, {})
    # a final answer's arguments are kept with it, never refused (nothing could answer them)
    assert parse_answer({"tool": "done", "args": {"force": True}}) == (DONE, {"force": True})
    assert parse_answer({"tool": "done", "args": [1]}) == (DONE, {"value": [1]})


@pytest.mark.parametrize(
    ("answer", "error", "message"),
    [
        ("create_server", MalformedAnswer, "not a JSON object"),
        ({"args": SERVER}, MalformedAnswer, "no tool name"),
        ({"tool": 42}, MalformedAnswer, "no tool name"),
        ({"tool": "delete_everything", "args": {}}, UnknownTool, "does not exist"),
        ({"tool": "create_server", "args": []}, InvalidArguments, "must be an object"),
        (
            {"tool": "create_server", "args": {**SERVER, "size": "gigantic"}},
            InvalidArguments,
            "size: Input should be 'small', 'medium' or 'large' \\(got 'gigantic'\\)",
        ),
        (
            {"tool": "create_server", "args": {"name": "srv-1"}},
            InvalidArguments,
            "size: Field required; region: Field required",
        ),
        (
            {"tool": "create_server", "args": {**SERVER, "extra": "x"}},
            InvalidArguments,
            "extra: Extra inputs are not permitted",
        ),
        (
            {"tool": "create_server", "args": {**SERVER, "name": ""}},
            InvalidArguments,
            "name: String should have at least 1 character",
        ),
        (
            {"tool": "create_server", "args": {**SERVER, "name": "x" * 201}},
            InvalidArguments,
            "name: String should have at most 200 characters",
        ),
    ],
)
def test_a_bad_answer_gets_a_specific_error(
    answer: object, error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        parse_answer(answer)
