"""The small scope's grid: every story at every point of every step of every kind."""

from __future__ import annotations

from agent_runtime.crash import CRASH_POINTS

from .agents import KINDS
from .runners import InProcessRunner
from .scope import (
    DURABLE_STORIES,
    HOST_STORIES,
    ONCE_TOOL,
    POINT_STORIES,
    RACE_STORIES,
    RESOLVE_STORIES,
    STEP_STORIES,
    STORIES,
    WAIT_STORIES,
    WRITTEN_AT,
    grid,
)
from .scope_stories import (
    EARLY_RESOLVE_AT,
    LANDING_STORIES,
    REFUSED_AT,
    RETRY_AT,
    RETRY_STORIES,
    SHIFT_AT,
)


def test_the_grid_disrupts_every_step_of_every_kind_at_every_point(
    inprocess_runner: InProcessRunner,
) -> None:
    seen: set[tuple[str, str, str, int]] = set()
    for cell in grid(inprocess_runner):
        start = next(e for e in cell.events if e.op != "configure")  # the deployment first
        foreign = cell.how in HOST_STORIES  # run r2's: a worker of another host
        sibling = cell.how == "sibling"  # run r1's: a thread of the claimer's process
        assert start.op == "start" and start.run == (2 if foreign else 1 if sibling else 0)
        assert start.kind == cell.kind
        placed = [e for e in cell.events if e.seq == cell.seq and e.point is not None]
        assert placed, cell  # the disruption (or the fault's pause) is at that step
        point = cell.point or str(placed[0].point)
        assert cell.point in ("", placed[0].point)
        seen.add((cell.kind, cell.how, point, cell.seq))
    for kind in KINDS:
        tools = inprocess_runner.baseline(kind).tools
        for seq, tool in enumerate(tools[:-1]):
            assert tool != "done"
            for how in POINT_STORIES:
                points = WRITTEN_AT if how == "db_crash" else CRASH_POINTS
                for point in points:
                    assert (kind, how, point, seq) in seen, (kind, how, point, seq, tool)
            assert (kind, "remote_fault", "before_intent", seq) in seen
            assert (kind, "two_runs", "after_confirm", seq) in seen
            assert (kind, "no_retries", "before_intent", seq) in seen
            for how in WAIT_STORIES:  # a once call parks instead of waiting to retry
                waits = ONCE_TOOL.get(kind) != tool
                assert ((kind, how, "before_intent", seq) in seen) == waits, (kind, how, seq)
        for seq in range(len(tools)):
            assert (kind, "bad_answers", "before_decide", seq) in seen
            assert (kind, "gave_up", "before_decide", seq) in seen
        assert (kind, "crash", "before_decide", len(tools) - 1) in seen  # the final answer
        assert (kind, "crash", "after_intent", len(tools) - 1) not in seen  # never reached
    for how, point in RESOLVE_STORIES.items():
        assert ("once", how, point, 2) in seen
    for how in DURABLE_STORIES:  # one cell each, the last event a database crash
        cells = [c for c in grid(inprocess_runner) if c.how == how]
        assert len(cells) == 1 and cells[0].events[-1].op == "db_crash", how
    for how, point in RACE_STORIES.items():  # one cell each, at the first kind's first step
        assert [c.point for c in grid(inprocess_runner) if c.how == how] == [point], how
    assert ("support", "stale_outage", "after_intent", 0) in seen  # the read's step only
    assert ("support", "stale_outage", "after_intent", 1) not in seen
    for how in HOST_STORIES:  # one cell each, at the first kind's first step, run r2's
        [cell] = [c for c in grid(inprocess_runner) if c.how == how]
        assert (cell.kind, cell.seq) == (KINDS[0], 0)
        assert {e.run for e in cell.events if e.run is not None} == {2}
    for how, (kind, seq) in {**REFUSED_AT, **SHIFT_AT, **RETRY_AT}.items():  # one cell each
        [cell] = [c for c in grid(inprocess_runner) if c.how == how]
        assert (cell.kind, cell.seq) == (kind, seq)
    for how in LANDING_STORIES:  # only at the checked send
        assert {(c.kind, c.seq) for c in grid(inprocess_runner) if c.how == how} == {("support", 2)}
    stories = (
        *POINT_STORIES, *STEP_STORIES, *RESOLVE_STORIES, *DURABLE_STORIES, *RACE_STORIES,
        *HOST_STORIES, *REFUSED_AT, *RETRY_STORIES, *EARLY_RESOLVE_AT, *SHIFT_AT,
    )  # fmt: skip
    assert set(STORIES) == set(stories)
