"""The small scope's grid: every story at every point of every step of every kind."""

from __future__ import annotations

from agent_runtime.crash import CRASH_POINTS

from .agents import KINDS
from .runners import InProcessRunner
from .scope import STORIES, WRITTEN_AT, grid


def test_the_grid_disrupts_every_step_of_every_kind_at_every_point(
    inprocess_runner: InProcessRunner,
) -> None:
    seen: set[tuple[str, str, str, int]] = set()
    for events in grid(inprocess_runner):
        start, disruption = events[0], events[1]
        assert start.op == "start" and start.run == 0
        how = disruption.op if disruption.op != "pause" else "outpaced"
        how = {"stall": "overtaken"}.get(how, how)
        assert disruption.point is not None and disruption.seq is not None
        seen.add((start.kind, how, disruption.point, disruption.seq))
    for kind in KINDS:
        tools = inprocess_runner.baseline(kind).tools
        for seq, tool in enumerate(tools[:-1]):
            assert tool != "done"
            for how in STORIES:
                points = WRITTEN_AT if how == "db_crash" else CRASH_POINTS
                for point in points:
                    assert (kind, how, point, seq) in seen, (kind, how, point, seq, tool)
        assert (kind, "crash", "before_decide", len(tools) - 1) in seen  # the final answer
        assert (kind, "crash", "after_intent", len(tools) - 1) not in seen  # never reached
