"""A ``once`` call is journaled as sent by its intent and by each redo an operator ordered,
and never re-sent by the runtime itself.

``Actor.act`` starts a redo's attempt as a first one (``first = call is None or
call.state == "redo"``); as ``>`` or ``is`` (c257c1d1, 897167dd, 2026-12-06) the redo's
attempt was taken for a re-send and journaled its start twice (``record_redo``, then
``record_send``): a once call counted as sent three times for two sends. Nothing read
``tool_calls.sends`` back; ``divergence`` now does.
"""

from __future__ import annotations

import pytest

from agent_runtime.tools import acting
from agent_runtime.tools.acting import Actor

from .planting import caught_with_edit
from .runners import InProcessRunner
from .scope import story

FIRST = 'first = call is None or call.state == "redo"'


@pytest.mark.parametrize("new", [FIRST.replace("==", ">"), FIRST.replace("==", "is")])
def test_a_redo_journaled_as_a_resend_too_is_caught(
    runner: InProcessRunner, monkeypatch: pytest.MonkeyPatch, new: str
) -> None:
    found = caught_with_edit(
        runner,
        story("once", "resolve_redo", "after_intent", 2),
        monkeypatch,
        (acting, FIRST, new),
        take="Actor.act",
        put=(Actor, "act"),
    )

    assert "[divergence] run r0 step 2: the once call r0:2 is journaled as sent 3 times" in found
