"""Two worlds production has and the suite lacked until 2026-12-06: a run whose model
protocol a deployment switches between two of its workers, and a supervisor that dies
between its claim and its hand-out.

The seed's agent speaks ``decide``; its answers are journaled without a Chat Completions
message, so a worker started under ``MODEL_PROTOCOL=chat`` remakes each as an assistant
message (``conversation._assistant``). None of that ran in the suite: a remade answer
that lost its calls, or kept the final answer's, passed it (11 of ``conversation``'s 14
survivors). ``asked`` now holds every remade answer to the journal's decisions and every
Chat Completions question to what a real server accepts.

A supervisor's claim its worker has not adopted names the run after the supervisor's
token (``host:pid:nonce:run``): a check of the token's parts that wanted exactly three
called such a dead owner alive (``owner_is_dead``: fe0f5304, 20b6e0e0), and a restart
then fenced it out as ``forced``.
"""

from __future__ import annotations

from typing import Final

import pytest

from agent_runtime.llm import conversation
from agent_runtime.loop import claiming, lease
from agent_runtime.operator import snapshot, views

from .planting import failure, plant_python
from .runners import InProcessRunner, ProcessRunner
from .scope_stories import shifted

SWITCHED = shifted("switched", 2)
ORPHANED = shifted("orphaned", 0)


ROLE: Final = 'if message is None or message.get("role") != "assistant":'


@pytest.mark.parametrize(
    ("take", "old", "new"),
    [
        # a remade answer that lost its calls (or kept only a final answer's): the mock
        # refuses a tool message without its call (HTTP 400), as a real server does
        ("_assistant", "if d.tool != DONE", "if d.tool == DONE"),
        ("_assistant", "if d.tool != DONE", "if d.tool > DONE"),
        ("_assistant", "if d.tool != DONE", "if d.tool is DONE"),
        ("_assistant", "if calls else {})", "if not calls else {})"),
        # a decide answer is kept as it came (a tool and its arguments, no role): the role
        # test's < and > (4384ce00, b794df6b) compare None and raise, its `is` (6123739e)
        # keeps the decide answer as an assistant message no server accepts, and `and` for
        # `or` (42476223) reads the role of an answer that is not there
        ("_answer_messages", ROLE, ROLE.replace('!= "assistant"', '< "assistant"')),
        ("_answer_messages", ROLE, ROLE.replace('!= "assistant"', '> "assistant"')),
        ("_answer_messages", ROLE, ROLE.replace('!= "assistant"', 'is "assistant"')),
        ("_answer_messages", ROLE, ROLE.replace(" or ", " and ")),
    ],
)
def test_a_remade_answer_that_is_not_one_is_caught(
    runner: InProcessRunner, monkeypatch: pytest.MonkeyPatch, take: str, old: str, new: str
) -> None:
    # the story passes on the real runtime: test_the_switched_run_asks_in_both_protocols
    planted = getattr(plant_python(monkeypatch, conversation, old, new), take)
    monkeypatch.setattr(conversation, take, planted)
    assert "run r0" in failure(runner, SWITCHED)


def test_the_switched_run_asks_in_both_protocols(runner: InProcessRunner) -> None:
    """The story runs as it says: questions of both protocols, and a chat question that
    carries remade answers (the ``asked`` check held them to the journal)."""
    from .questions import asked

    assert failure(runner, SWITCHED) == ""
    runner.warm()
    runner.reset()
    try:
        for event in SWITCHED:
            runner.apply(event)
            runner.check()
        runner.settle()
        heard = [q for q in asked(runner.remotes) if q["run_id"] == "r0"]
    finally:
        runner.cleanup()
    protocols = [q["protocol"] for q in heard]
    assert "chat" in protocols and protocols[0] == "decide" and protocols[-1] == "decide"
    chat = next(q for q in heard if q["protocol"] == "chat")
    remade = [m for m in chat["body"]["messages"] if m["role"] == "assistant"]
    assert [m["tool_calls"][0]["id"] for m in remade] == ["call_0", "call_1"]


@pytest.mark.parametrize("new", ["if len(parts) != 3 or", "if len(parts) > 3 or"])
def test_a_dead_supervisors_claim_is_proved_dead(
    runner: InProcessRunner, monkeypatch: pytest.MonkeyPatch, new: str
) -> None:
    assert failure(runner, ORPHANED) == ""
    planted = plant_python(monkeypatch, lease, "if len(parts) < 3 or", new)
    monkeypatch.setattr(claiming, "owner_is_dead", planted.owner_is_dead)

    found = failure(runner, ORPHANED)

    assert "[claim_truth] run r0: generation 3's claim fenced" in found
    assert ":orphaned:r0 out as if alive, though its process is gone" in found


def test_a_dead_supervisors_claim_is_proved_dead_with_processes(
    process_runner: ProcessRunner,
) -> None:
    assert failure(process_runner, ORPHANED) == ""


SIBLING = shifted("sibling", 0)


def test_a_thread_of_the_claimers_own_process_is_never_called_dead(
    runner: InProcessRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Run r1's in-process workers are threads of the suite's process, as an application
    that runs workers in threads has them: its pid lives on after the thread died, so the
    operator's list must not call the owner gone (``owner_is_dead``'s own-pid test as
    ``return True``: 6040dece-3)."""
    assert failure(runner, SIBLING) == ""
    old = "if pid == os.getpid():\n        return False"
    planted = plant_python(monkeypatch, lease, old, old.replace("False", "True"))
    for module in (claiming, snapshot, views):  # each imported it by name
        monkeypatch.setattr(module, "owner_is_dead", planted.owner_is_dead)

    found = failure(runner, SIBLING)

    assert "[owner_view] run r1" in found
    assert "not provably gone), the operator's list says owner_gone=True" in found
