"""A checked call's wait for its earlier attempts to land, with the clock moving part of it.

The suite's clock stands still while a worker sleeps, so until 2026-12-06 every landing
wait it ever saw ended in ``CallInFlight`` after one sleep, and eight mutants of
``Actor._await_landing``'s "did the clock move at least half the wait" test survived the
whole-module run (``waited - seconds < waited / 2`` as ``/ 1``, ``/ 3``, ``* 2``, ``!=``,
...). A landing wait is now the gate ``retry_wait`` too, the stories ``held_crept`` and
``held_moved`` tick part of it while the restart stands there, and ``landing``
(``properties.waits.landing_truth``) holds the worker to the rule with its own arithmetic.
"""

from __future__ import annotations

import pytest

from agent_runtime.tools import acting
from agent_runtime.tools.acting import Actor

from .planting import caught_with_edit, failure
from .runners import InProcessRunner
from .scope import story
from .waits import LANDING

RULE = "if waited is not None and waited - seconds < waited / 2:"


def _landing_waits(runner: InProcessRunner) -> list[list[float]]:
    """The landing waits of each worker of the last replay, in order."""
    waits = []
    for w in runner.workers:
        log = getattr(w.pilot, "waits", None)
        if log is not None:
            waits.append([x.seconds for x in log.waits if x.cause == LANDING])
    return [each for each in waits if each]


def test_a_clock_that_moved_less_than_half_the_wait_releases_the_run(
    runner: InProcessRunner,
) -> None:
    events = story("support", "held_crept", "", 2, "send_email")

    assert failure(runner, events) == ""

    assert any("ended: CallInFlight" in line for line in runner.trace), runner.trace
    bound = runner.settings.in_flight
    (first, *_) = _landing_waits(runner)
    assert first == [pytest.approx(bound)]  # one wait: 40% of it passed, so it released


def test_a_clock_that_moved_half_the_wait_or_more_waits_the_rest(
    runner: InProcessRunner,
) -> None:
    events = story("support", "held_moved", "", 2, "send_email")

    assert failure(runner, events) == ""

    bound = runner.settings.in_flight
    (first, *_) = _landing_waits(runner)
    # 60% passed while it stood in the first wait: it waits the other 40%, the clock
    # stands still through that one, so it releases the run then
    assert first == [pytest.approx(bound), pytest.approx(0.4 * bound)]
    assert any("ended: CallInFlight" in line for line in runner.trace), runner.trace


@pytest.mark.parametrize(
    ("how", "new"),
    [
        ("held_moved", "if waited is not None and waited - seconds < waited / 1:"),  # 03417811
        ("held_moved", "if waited is not None and waited - seconds < waited * 2:"),  # 9023a98b
        ("held_moved", "if waited is not None and waited % seconds < waited / 2:"),  # 5005b17e
        ("held_moved", "if waited is not None and waited - seconds != waited / 2:"),  # 4543da20
        ("held_crept", "if waited is not None and waited - seconds < waited / 3:"),  # 8e3ec967
    ],
)
def test_a_landing_wait_that_breaks_the_half_rule_is_caught(
    runner: InProcessRunner, monkeypatch: pytest.MonkeyPatch, how: str, new: str
) -> None:
    """Released too soon (the clock moved 60% of the wait) or waiting again although it
    moved only 40%: each is the mutant of the 2026-12-06 run named beside it."""
    events = story("support", how, "", 2, "send_email")

    found = caught_with_edit(
        runner,
        events,
        monkeypatch,
        (acting, RULE, new),
        take="Actor._await_landing",
        put=(Actor, "_await_landing"),
    )

    assert "[landing] run r0 step 2:" in found
