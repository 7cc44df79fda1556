"""Model answers are checked before anything is journaled."""

from __future__ import annotations

import pytest

from agent_runtime.errors import InvalidArguments, MalformedAnswer, UnknownTool
from agent_runtime.tools import DONE, parse_answer

SERVER = {"name": "srv-1", "size": "small", "region": "local-1"}


def test_a_valid_answer_is_parsed_into_tool_and_arguments() -> None:
    assert parse_answer({"tool": "create_server", "args": SERVER}) == ("create_server", SERVER)
    assert parse_answer({"tool": "done", "args": {}}) == (DONE, {})
    assert parse_answer({"tool": "done"}) == (DONE, {})


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
            "size='gigantic' is not one of",
        ),
        ({"tool": "create_server", "args": {"name": "srv-1"}}, InvalidArguments, "missing"),
        (
            {"tool": "create_server", "args": {**SERVER, "extra": "x"}},
            InvalidArguments,
            "unexpected",
        ),
        (
            {"tool": "create_server", "args": {**SERVER, "name": ""}},
            InvalidArguments,
            "non-empty string",
        ),
        ({"tool": "done", "args": {"force": True}}, InvalidArguments, "takes no arguments"),
    ],
)
def test_a_bad_answer_gets_a_specific_error(
    answer: object, error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        parse_answer(answer)
