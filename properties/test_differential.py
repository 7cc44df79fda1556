"""The two runners agree: the same schedule has the same outcome in-process and with
real processes (forked workers dying by ``os._exit(1)``/``SIGKILL``, frozen by
``SIGSTOP``, mocks under uvicorn over HTTP).

The outcome compared is, per run: status, ``llm_calls``, the model's call count,
the journaled decisions (seq, tool, args), the tool calls (seq, key, state,
remote status, result id) and the cloud's records (key, kind, id, args); plus the
resource counts, and the trace (what each event did: which worker paused, crashed,
was fenced, at which point and step).
"""

from __future__ import annotations

from typing import Any

from hypothesis import given

from .events import Event, program
from .invariants import Violation, Violations
from .profiles import active_profile, profile_settings
from .runner import ScheduleRunner
from .runners import InProcessRunner, ProcessRunner
from .strategies import schedules

EXAMPLES = {"dev": 6, "ci": 15, "nightly": 100}  # process-runner schedules per run


def _run(runner: ScheduleRunner, events: list[Event]) -> tuple[Any, list[str]]:
    try:
        outcome: Any = runner.replay(events)
    except (Violation, Violations) as exc:
        outcome = f"violation: {exc}"
    return outcome, list(runner.trace)


def _first_difference(a: list[str], b: list[str]) -> str:
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return f"trace line {i + 1}:\n  inprocess: {x}\n  process:   {y}"
    return f"trace lengths {len(a)} and {len(b)}"


def test_both_runners_give_random_schedules_the_same_outcome(
    inprocess_runner: InProcessRunner, process_runner: ProcessRunner
) -> None:
    profile = active_profile()

    @profile_settings(profile, max_examples=EXAMPLES[profile], stateful_step_count=10)
    @given(schedules(max_events=10))
    def agree(events: list[Event]) -> None:
        fast, fast_trace = _run(inprocess_runner, events)
        real, real_trace = _run(process_runner, events)
        where = f"schedule:\n{program(events)}"
        assert fast_trace == real_trace, f"{_first_difference(fast_trace, real_trace)}\n{where}"
        assert fast == real, f"outcomes differ\n{where}\ninprocess: {fast}\nprocess:   {real}"
        assert not isinstance(fast, str), f"{fast}\n{where}"

    agree()
