"""Schedules for the pool mode (:mod:`properties.pool_runner`), as plain data.

- :func:`pool_schedules`: every event of :func:`properties.strategies.events` that costs
  no real time, plus the pool's own (SIGKILL, SIGTERM, stalls of pool workers, the
  supervisor's hang-up and SIGTERM, a rival supervisor's sweep). What the pool runner does
  with them differs from what the mimic runners do (the supervisor hands a dead worker's run
  on at once, the mimic waits for a sweep), so these are judged by the invariants alone.
- :func:`calm_schedules`: schedules where no worker dies, stalls or is outpaced: starts,
  steps, pauses, heartbeats, ticks, sweeps and the remotes' failures. There the real
  supervisor must do exactly what the mimic does, so the differential test requires the
  pool runner's outcome *and* trace to equal the in-process runner's.
"""

from __future__ import annotations

from hypothesis import strategies as st

from agent_runtime.crash import CRASH_POINTS

from .agents import DEFAULT_KIND, KINDS
from .events import MODEL_FAULTS, RUNS, Event
from .strategies import events

_RUN = st.integers(0, RUNS - 1)
_SEQ = st.one_of(st.none(), st.integers(0, 3))


def pool_events() -> st.SearchStrategy[Event]:
    """One event of any kind the pool mode takes, its own ones drawn as often as crashes."""
    kill = st.builds(
        lambda run, point, seq: Event(op="crash", run=run, point=point, seq=seq, kill=True),
        _RUN,
        st.sampled_from(CRASH_POINTS),
        _SEQ,
    )
    supervisor = st.sampled_from(
        (Event(op="rival_sweep"), Event(op="hangup"), Event(op="stop_supervisor"))
    )
    step = st.builds(lambda run: Event(op="step", run=run), _RUN)
    return st.one_of(
        events(drop_after=False),
        step,  # progress, so that workers come to serve run after run
        kill,
        st.builds(lambda run: Event(op="sigterm", run=run), _RUN),
        supervisor,
        st.just(Event(op="sweep", seconds=0.0)),  # the supervisor at once, nothing expired
    )


def calm_events() -> st.SearchStrategy[Event]:
    """One event that kills, stalls or outpaces no worker."""
    on_run = st.sampled_from(("step", "heartbeat"))
    return st.one_of(
        st.builds(lambda run: Event(op="start", run=run), _RUN),
        st.builds(lambda op, run: Event(op=op, run=run), on_run, _RUN),
        st.builds(lambda op, run: Event(op=op, run=run), on_run, _RUN),  # twice: progress
        st.builds(
            lambda run, point, seq: Event(op="pause", run=run, point=point, seq=seq),
            _RUN,
            st.sampled_from(CRASH_POINTS),
            _SEQ,
        ),
        st.builds(lambda s: Event(op="sweep", seconds=s), st.sampled_from((None, 11.0, 2.0))),
        st.builds(lambda s: Event(op="tick", seconds=s), st.sampled_from((2.0, 11.0, 13.0))),
        st.builds(lambda n: Event(op="cloud_fault", fault="fail_before", n=n), st.integers(1, 4)),
        st.builds(
            lambda fault: Event(op="model_fault", fault=fault, n=1), st.sampled_from(MODEL_FAULTS)
        ),
    )


@st.composite
def _schedule(draw: st.DrawFn, max_events: int, each: st.SearchStrategy[Event]) -> list[Event]:
    """Events that mostly apply: run events pick among the runs started so far."""

    def kind() -> str | None:
        chosen = draw(st.sampled_from(KINDS))
        return None if chosen == DEFAULT_KIND else chosen

    started = [0]
    out = [Event(op="start", run=0, agent=kind())]
    for _ in range(draw(st.integers(0, max_events))):
        event = draw(each)
        if event.op == "start":
            if len(started) < RUNS:
                started.append(len(started))
                out.append(Event(op="start", run=started[-1], agent=kind()))
            continue
        if event.run is not None and event.run not in started:
            event = Event.from_json({**event.to_json(), "run": started[event.run % len(started)]})
        out.append(event)
    return out


def pool_schedules(*, max_events: int = 10) -> st.SearchStrategy[list[Event]]:
    return _schedule(max_events, pool_events())


def calm_schedules(*, max_events: int = 10) -> st.SearchStrategy[list[Event]]:
    return _schedule(max_events, calm_events())
