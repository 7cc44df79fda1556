"""The two runners agree: the same schedule has the same outcome in-process and with
real processes (forked workers dying by ``os._exit(1)``/``SIGKILL``, frozen by
``SIGSTOP``, mocks under uvicorn over HTTP).

The outcome compared is, per run: status, ``llm_calls``, the model's call count,
the journaled decisions (seq, tool, args), the tool calls (seq, key, state,
remote status, result id) and the cloud's records (key, kind, id, args); plus the
resource counts, and the trace (what each event did: which worker paused, crashed,
was fenced, at which point and step).

A failure is fast and saved. Each schedule runs in-process first: a violation found
there fails at once, so Hypothesis shrinks it without ever starting a process. Only a
schedule the in-process runner passes goes through the process runner. The first
failing schedule is saved before shrinking; shrinking stops after
:data:`~properties.machine.SHRINK_BUDGET` seconds; the shrunk one is saved too, and both
print their replay commands.

The third runner, the real supervisor and its pool (``--mode pool``), has its share of
the differential in ``test_pool.py``: calm schedules must give it this test's in-process
outcome and trace; every other pool schedule, every invariant.
"""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path

from hypothesis import given
from hypothesis.control import current_build_context

from .events import Event, Schedule
from .machine import FAILURES, SHRINK_BUDGET, report, shrinking_within
from .profiles import active_profile, profile_settings
from .runners import InProcessRunner, ProcessRunner, outcome_and_trace
from .strategies import schedules

EXAMPLES = {"dev": 6, "ci": 15, "nightly": 100}  # process-runner schedules per run


def _first_difference(a: list[str], b: list[str]) -> str:
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return f"trace line {i + 1}:\n  inprocess: {x}\n  process:   {y}"
    return f"trace lengths {len(a)} and {len(b)}"


class _Failures:
    """Saves the first failing schedule at once and the shrunk one at the end."""

    def __init__(self, profile: str, directory: Path) -> None:
        self.profile = profile
        self.directory = directory
        self.first: float | None = None

    def save(self, events: list[Event], failure: str, runner: str) -> None:
        final = current_build_context().is_final
        if not final and self.first is not None:
            return
        schedule = Schedule(
            events=tuple(events),
            name="differential",
            profile=self.profile,
            failure=failure,
            meta={"runner": runner},
        )
        digest = hashlib.sha1(json.dumps([e.to_json() for e in events]).encode()).hexdigest()
        stem = "differential" if final else "differential-unshrunk"
        path = schedule.save(self.directory / f"{stem}-{digest[:8]}.json")
        if self.first is None:
            self.first = time.monotonic()
        title = "shrunk schedule" if final else "failing schedule (saved before shrinking)"
        print(report(title, schedule, path))


def test_both_runners_give_random_schedules_the_same_outcome(
    inprocess_runner: InProcessRunner, process_runner: ProcessRunner
) -> None:
    profile = active_profile()
    failures = _Failures(profile, FAILURES)

    @profile_settings(profile, max_examples=EXAMPLES[profile], stateful_step_count=10)
    @given(schedules(max_events=10))
    def agree(events: list[Event]) -> None:
        fast, fast_trace = outcome_and_trace(inprocess_runner, events)
        if isinstance(fast, str):
            failures.save(events, fast, "inprocess")
            raise AssertionError(fast)
        real, real_trace = outcome_and_trace(process_runner, events)
        problem = None
        if fast_trace != real_trace:
            problem = _first_difference(fast_trace, real_trace)
        elif fast != real:
            problem = f"outcomes differ\ninprocess: {fast}\nprocess:   {real}"
        if problem is not None:
            failures.save(events, problem, "process")
            raise AssertionError(problem)

    with shrinking_within(SHRINK_BUDGET):
        agree()
