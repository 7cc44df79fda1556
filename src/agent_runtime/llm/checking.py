"""Checking a model's answer before it is journaled, and counting the bad ones.

Two kinds of bad answer, two fates:

=====================  ==================================================================
cannot be journaled    U+0000 or a lone surrogate anywhere, NaN or an infinity, an integer
                       of 4000 digits or more, nesting past ``MAX_DEPTH``, a string past
                       ``MAX_STRING`` (:mod:`agent_runtime.store.journalable`):
                       :class:`~agent_runtime.errors.MalformedAnswer` before anything is
                       written. The run stays resumable; a model that keeps answering so
                       is failed by the supervisor's give-up, with this reason.
refused by the tools   a tool the agent does not have, arguments its schema refuses or that
                       are not JSON: the answer is journaled as it came (so it is never
                       bought twice), the refused call with it, already resolved as
                       ``failed``/``rejected``, its error the result the model is shown
                       next. A run shows its model ``max_bad_answers`` such answers; the
                       next one fails the run (:class:`~agent_runtime.errors.
                       TooManyBadAnswers`).
=====================  ==================================================================
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agent_runtime.errors import (
    InvalidArguments,
    MalformedAnswer,
    ModelError,
    TooManyBadAnswers,
    UnknownTool,
)
from agent_runtime.llm.conversation import DONE
from agent_runtime.llm.models import Answer, Proposed
from agent_runtime.store.journalable import MAX_STRING, problem
from agent_runtime.store.records import REJECTED, History
from agent_runtime.tools.tooldef import Tool

# (tool, arguments as journaled, call id, arguments as typed (None: done or refused),
#  the error the model is shown (None: the call is good))
Checked = tuple[str, dict[str, Any], str | None, dict[str, Any] | None, dict[str, Any] | None]


def refuse_unjournalable(answer: Answer) -> None:
    """:class:`MalformedAnswer` naming what in ``answer`` the journal cannot hold."""
    parts: list[tuple[str, Any]] = [("message", answer.message), ("usage", answer.usage)]
    parts += [
        (f"call {i} ({c.tool!r:.60})'s arguments", c.args) for i, c in enumerate(answer.calls)
    ]
    for name, value in parts:
        found = problem(value, max_string=MAX_STRING, where=name)
        if found is not None:
            raise MalformedAnswer(f"the model's answer cannot be journaled: {found}")


def checked_answer(answer: Answer, tools: Mapping[str, Tool]) -> list[Checked]:
    """Every call of ``answer``, checked against ``tools``: a refused one carries the error
    the model is shown. A final answer is taken as the model gave it: arguments it carries
    (the seed protocol lets ``{"tool": "done", "args": {...}}`` through) are journaled with
    it, never refused, since a refusal would answer no call and the paid answer would be
    bought again."""
    decided: list[Checked] = []
    for proposed in answer.calls:
        try:
            decided.append(_checked(proposed, tools))
        except (UnknownTool, InvalidArguments) as exc:
            args = proposed.args if isinstance(proposed.args, dict) else {}
            decided.append((proposed.tool, args, proposed.call_id, None, rejection(exc)))
    return decided


def checked_calls(
    answer: Answer, tools: Mapping[str, Tool]
) -> list[tuple[str, dict[str, Any], str | None]]:
    """The answer's calls as (tool, validated args, call id), or the error saying which
    call is wrong: an unknown tool, or arguments its schema refuses."""
    return [_checked(proposed, tools)[:3] for proposed in answer.calls]


def final_args(args: object) -> dict[str, Any]:
    """A final answer's arguments as its decision keeps them: an object as it is, none as
    ``{}``, anything else under ``"value"`` (the answer itself is journaled whole too)."""
    if args is None:
        return {}
    return args if isinstance(args, dict) else {"value": args}


def rejection(exc: ModelError) -> dict[str, Any]:
    """A refused call's result, as the model is shown it."""
    return {"error": type(exc).__name__, "message": str(exc)}


def _checked(proposed: Proposed, tools: Mapping[str, Tool]) -> Checked:
    if proposed.tool == DONE:
        return (DONE, final_args(proposed.args), proposed.call_id, None, None)
    tool = tools.get(proposed.tool)
    if tool is None:
        raise UnknownTool(
            f"the model chose tool {proposed.tool!r:.100}, which does not exist; known tools: "
            f"{', '.join(sorted(tools))}, or a final answer"
        )
    if proposed.problem is not None:
        raise InvalidArguments(proposed.problem)
    as_json, typed = tool.checked(proposed.args)
    return (tool.name, as_json, proposed.call_id, typed, None)


class BadAnswers:
    """The answers of one history that had a call refused (kept in ``History.memo``, so a
    step counts only what was added since the last)."""

    KEY = "checking.bad_answers"

    def __init__(self) -> None:
        self.next_seq = 0
        self.answers: set[int] = set()  # their llm_call numbers
        self.last: str = ""  # the error of the last refused call

    @classmethod
    def of(cls, history: History) -> BadAnswers:
        found = history.memo.get(cls.KEY)
        if not isinstance(found, cls):
            found = history.memo[cls.KEY] = cls()
        found.update(history)
        return found

    def update(self, history: History) -> None:
        while self.next_seq in history.decisions:
            call = history.calls.get(self.next_seq)
            if call is not None and call.remote_status == REJECTED:
                self.answers.add(history.decisions[self.next_seq].llm_call)
                self.last = str(call.result.get("message", "")) if call.result else ""
            self.next_seq += 1

    def refuse_more_than(self, limit: int, run_id: str) -> None:
        """:class:`TooManyBadAnswers` once the run had more bad answers than ``limit``."""
        if len(self.answers) > limit:
            raise TooManyBadAnswers(
                f"run {run_id}: the model gave {len(self.answers)} answers naming an unknown "
                f"tool or invalid arguments; {limit} are shown back to it (MAX_BAD_ANSWERS); "
                f"the last: {self.last}"
            )
