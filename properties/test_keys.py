"""A call's key is ``<run>:<seq>``, a refused call's too, wherever it sits in its answer.

``Journal.record_answer`` numbers an answer's calls ``seq + i``; the key it journals for a
refused call (an unknown tool, invalid arguments) was never checked, and the mock spoiled
only the first call of an answer of several, where ``i`` is 0: five mutants of that sum
survived the 2026-12-06 run (b2dc1729 ``-``, fd546936 ``>>``, cc6823c7 ``<<``, 0073bb6b
``|``, ce44bd49 ``^``). The mock now spoils the last call of several every other time,
``divergence`` holds every journaled key to the design's, and the small scope refuses the
parallel kind's second call at seq 1 + 1 (``refused_last``) and at seq 2 + 1
(``refused_later``): no arithmetic but the sum gives both.
"""

from __future__ import annotations

import pytest

from agent_runtime.store import journal
from agent_runtime.store.journal import Journal

from .planting import caught_with_edit
from .runners import InProcessRunner
from .scope import story
from .scope_stories import REFUSED_AT

SUM = '"key": idempotency_key(lease.run_id, seq + i),'


def test_a_refused_last_call_is_journaled_under_its_own_steps_key(
    runner: InProcessRunner,
) -> None:
    outcome = runner.replay(story("parallel", "refused_later", "", 2))

    calls = outcome["r0"]["calls"]
    assert [(c[0], c[1], c[3]) for c in calls if c[3] == "rejected"] == [
        (0, "r0:0", "rejected"),  # the unknown tool, alone in its answer
        (3, "r0:3", "rejected"),  # the second call of the answer at seq 2
    ]


@pytest.mark.parametrize(
    ("how", "operator"),
    [
        ("refused_last", "-"),
        ("refused_last", ">>"),
        ("refused_later", "<<"),  # 1 << 1 is 1 + 1: only the later answer tells
        ("refused_last", "|"),  # 2 | 1 and 2 ^ 1 are 2 + 1: only the first tells
        ("refused_last", "^"),
    ],
)
def test_a_key_numbered_otherwise_is_caught(
    runner: InProcessRunner, monkeypatch: pytest.MonkeyPatch, how: str, operator: str
) -> None:
    found = caught_with_edit(
        runner,
        story("parallel", how, "", REFUSED_AT[how][1]),
        monkeypatch,
        (journal, SUM, SUM.replace("+", operator)),
        take="Journal.record_answer",
        put=(Journal, "record_answer"),
    )

    assert "[divergence] run r0 step" in found and "its key is r0:" in found
