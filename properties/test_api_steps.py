"""A step's corners as a user's agents meet them (``properties/api_steps.py``): they hold,
and each slip the mutation driver left alive until then is caught."""

from __future__ import annotations

import pytest

from agent_runtime.llm import conversation
from agent_runtime.tools import acting

from .api_corners import AGED
from .api_steps import check_steps
from .planting import plant_python, plant_sql
from .runners import InProcessRunner


def test_a_steps_corners_hold(runner: InProcessRunner) -> None:
    assert check_steps(runner) == []


STILL_OWNER = 'if tool.effect != "read":\n            self.journal.check_owner'
CUT = "str(exc)[:500]}"


@pytest.mark.parametrize(
    ("method", "old", "new", "said"),
    [
        ("_still_owner", STILL_OWNER, STILL_OWNER.replace("!=", "is not"), "a read call asked"),
        ("_still_owner", STILL_OWNER, STILL_OWNER.replace("!=", "<="), "a read call asked"),
        ("_attempts", CUT, CUT.replace("500", " 499"), "kept as 499 characters"),
        ("_attempts", CUT, CUT.replace("500", " 501"), "kept as 501 characters"),
        ("act", "tool.checked(decision.args)[1]", "tool.checked(decision.args)[ 0]",
         "a journaled lookup was handed ['A-1001', "),
        ("act", "except InvalidArguments as exc:", "except KeyError as exc:",
         'a journaled decision that no longer fits ended the run as "InvalidArguments'),
        ("act", "redo=True)", "redo=False)", "intent spans said redo=[False]"),
    ],
)  # fmt: skip
def test_a_slip_of_acting_is_caught(
    runner: InProcessRunner,
    monkeypatch: pytest.MonkeyPatch,
    method: str,
    old: str,
    new: str,
    said: str,
) -> None:
    planted = plant_python(monkeypatch, acting, old, new)
    monkeypatch.setattr(acting.Actor, method, getattr(planted.Actor, method))
    assert said in "\n".join(check_steps(runner))


ANSWER = "decisions[seq].llm_call == llm_call:"


@pytest.mark.parametrize(
    ("where", "old", "new", "said"),
    [
        ("Transcript.update", ANSWER, ANSWER.replace("==", "is"),
         f"a run resumed inside an answer past answer {AGED} ended"),
        ("_assistant", "if d.tool != DONE", "if d.tool < DONE", "a run without its answers kept"),
        ("_assistant", "if d.tool != DONE", "if d.tool <= DONE", "a run without its answers kept"),
    ],
)  # fmt: skip
def test_a_slip_of_the_conversation_is_caught(
    runner: InProcessRunner,
    monkeypatch: pytest.MonkeyPatch,
    where: str,
    old: str,
    new: str,
    said: str,
) -> None:
    planted = plant_python(monkeypatch, conversation, old, new)
    if where == "_assistant":
        monkeypatch.setattr(conversation, where, planted._assistant)
    else:
        monkeypatch.setattr(conversation.Transcript, "update", planted.Transcript.update)
    assert said in "\n".join(check_steps(runner))


def test_a_history_that_drops_the_decisions_without_an_answer_is_caught(
    runner: InProcessRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    plant_sql(monkeypatch, "sql/queries.sql:load_history:left_join:22c12a3c")
    assert "a run without its answers kept" in "\n".join(check_steps(runner))
