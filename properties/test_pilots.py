"""A drive of an in-process worker judges its gates in the worker's thread, exactly as the
runner would one message at a time: the same gates, in order, and the runner's errors."""

from __future__ import annotations

import threading
from typing import Literal

import pytest

from .events import Event
from .pilots import Gate
from .runners import InProcessRunner
from .thread_pilot import ThreadPilot


def test_a_drive_judges_every_gate_in_order_in_the_worker_thread_and_stops_where_told(
    inprocess_runner: InProcessRunner,
) -> None:
    runner = inprocess_runner
    runner.reset()
    try:
        runner.apply(Event(op="start", run=0))
        w = runner.active["r0"]
        assert w is not None and isinstance(w.pilot, ThreadPilot)
        seen: list[tuple[str, int, bool]] = []

        def on_gate(gate: Gate) -> Literal["go", "pause"]:
            seen.append(
                (gate.point, gate.seq, threading.current_thread() is threading.main_thread())
            )
            return "pause" if gate.point == "after_confirm" else "go"

        stop = w.pilot.drive(on_gate, 400, resume=True)
        assert stop.action == "pause" and stop.message == Gate(point="after_confirm", seq=0)
        # the six gates after before_decide, each judged once, in the worker's thread
        assert [(p, s) for p, s, _ in seen] == [
            ("after_decide_before_journal", 0),
            ("after_decide", 0),
            ("before_intent", 0),
            ("after_intent", 0),
            ("after_call", 0),
            ("after_confirm", 0),
        ]
        assert not any(main for _, _, main in seen)
    finally:
        runner.cleanup()


def test_what_the_runner_raises_at_a_gate_is_raised_in_the_runner_and_the_worker_waits(
    inprocess_runner: InProcessRunner,
) -> None:
    runner = inprocess_runner
    runner.reset()
    try:
        runner.apply(Event(op="start", run=0))
        w = runner.active["r0"]
        assert w is not None

        def refuse(gate: Gate) -> Literal["go"]:
            raise LookupError(f"no rule for {gate.point}")

        with pytest.raises(LookupError, match="no rule for after_decide_before_journal"):
            runner._drive(w, refuse)
        stop = w.pilot.drive(lambda g: "pause", 1, resume=True)  # still at that gate
        assert stop.message == Gate(point="after_decide", seq=0)
    finally:
        runner.cleanup()
