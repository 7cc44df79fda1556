"""What the runtime asks the model is the journal, exactly: a ``decide`` question's steps
each once and in step order, and each journaled Chat Completions answer with the token
usage the model reported.

``Steps.json`` keeps the settled steps' encodings across a worker's questions and starts
the next question after them (``next_seq = seq + 1``); eight mutants of that sum survived
the 2026-12-06 run (3cdff6bc ``*``, 6248fa1e ``//``, ae68e67c ``%``, 00409eee ``**``,
048976c8 ``>>``, f52b5b59 ``|``, 67aa586a ``&``, ca3c87fe ``^``): each sends a step twice
(the mock plans from the steps and did not mind). ``record_answer``'s ``usage is not
None`` as ``is None`` or ``not ...`` (948ad7fd, 38da42aa) journaled no usage: nothing read
it back.
"""

from __future__ import annotations

import pytest

from agent_runtime.llm import conversation
from agent_runtime.llm.conversation import Steps
from agent_runtime.store import journal
from agent_runtime.store.journal import Journal

from .planting import caught_with_edit
from .runners import InProcessRunner
from .scope import story

NEXT = "self.next_seq = seq + 1"
USAGE = "usage=Jsonb(usage) if usage is not None else None,"


@pytest.mark.parametrize("operator", ["*", "//", "%", "**", ">>", "|", "&", "^"])
def test_a_step_sent_twice_or_out_of_order_is_caught(
    runner: InProcessRunner, monkeypatch: pytest.MonkeyPatch, operator: str
) -> None:
    """The seed's agent asks four questions in one worker (a crash after the last one's
    decision): an odd step kept before the fourth tells ``|`` and ``^`` from ``+``."""
    found = caught_with_edit(
        runner,
        story("provisioning", "crash", "after_decide", 3),
        monkeypatch,
        (conversation, NEXT, NEXT.replace("+", operator)),
        take="Steps.json",
        put=(Steps, "json"),
    )

    assert "[asked] run r0: question" in found and "each once, in step order" in found


@pytest.mark.parametrize(
    "new",
    [
        "usage=Jsonb(usage) if usage is None else None,",
        "usage=Jsonb(usage) if not usage is not None else None,",
    ],
)
def test_an_answer_journaled_without_its_usage_is_caught(
    runner: InProcessRunner, monkeypatch: pytest.MonkeyPatch, new: str
) -> None:
    found = caught_with_edit(
        runner,
        story("support", "crash", "after_confirm", 1),
        monkeypatch,
        (journal, USAGE, new),
        take="Journal.record_answer",
        put=(Journal, "record_answer"),
    )

    assert "[asked] run r0: answer 1 is journaled with usage None; the model reported" in found
