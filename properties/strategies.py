"""Random schedules as plain data, for tests that replay them in more than one runner.

The state machine generates schedules by running them; these strategies draw a
whole list of events up front (an event that does not apply when it comes is a
no-op), which is what the differential and determinism tests need.
"""

from __future__ import annotations

from hypothesis import strategies as st

from agent_runtime.crash import CRASH_POINTS

from .agents import DEFAULT_KIND, KINDS
from .events import GATES, MODEL_FAULTS, RUNS, TUNABLE, Event
from .events import RESOLVE_CHOICES as CHOICES

_RUN = st.integers(0, RUNS - 1)
_SEQ = st.one_of(st.none(), st.integers(0, 3))


def events(*, drop_after: bool = True) -> st.SearchStrategy[Event]:
    """One event. ``drop_after=False`` leaves out the faults that cost real time in the
    process runner (a dropped answer, or a cloud slower than the tool timeout, is waited
    for until the client times out)."""
    on_run = st.sampled_from(
        ("step", "resume", "restart", "drop_connection", "heartbeat", "resolve", "cancel", "retry")
    )
    crash = st.builds(
        lambda run, point, seq, kill: Event(op="crash", run=run, point=point, seq=seq, kill=kill),
        _RUN,
        st.sampled_from(GATES),
        _SEQ,
        st.booleans(),
    )
    counted = st.sampled_from(
        ("fail_before", "drop_after", "hold_next") if drop_after else ("fail_before", "hold_next")
    )
    return st.one_of(
        st.builds(lambda run: Event(op="start", run=run), _RUN),
        st.builds(lambda op, run: Event(op=op, run=run), on_run, _RUN),
        crash,
        crash,  # twice: crashes are what the suite is about
        st.builds(
            lambda op, run, point, seq: Event(op=op, run=run, point=point, seq=seq),
            st.sampled_from(("stall", "pause")),
            _RUN,
            st.sampled_from(GATES),
            _SEQ,
        ),
        st.builds(lambda s: Event(op="sweep", seconds=s), st.sampled_from((None, 11.0, 2.0))),
        st.builds(lambda s: Event(op="tick", seconds=s), st.sampled_from((2.0, 11.0, 13.0))),
        st.just(Event(op="land")),
        st.builds(
            lambda run, point, seq: Event(op="db_crash", run=run, point=point, seq=seq),
            _RUN,
            st.sampled_from(CRASH_POINTS),
            _SEQ,
        ),
        st.just(Event(op="db_crash")),
        st.builds(
            lambda fault, n: Event(op="cloud_fault", fault=fault, n=n), counted, st.integers(1, 5)
        ),
        st.builds(
            lambda seconds: Event(op="cloud_fault", fault="latency", seconds=seconds),
            st.sampled_from((0.0, 0.002, 1.5) if drop_after else (0.0, 0.002)),
        ),
        st.builds(
            lambda fault: Event(op="model_fault", fault=fault, n=1), st.sampled_from(MODEL_FAULTS)
        ),
        st.sampled_from(tuple(TUNABLE)).flatmap(  # workers from now on: another setting
            lambda setting: st.builds(
                lambda n: Event(op="configure", setting=setting, n=n),
                st.integers(0, min(3, TUNABLE[setting])),
            )
        ),
        st.builds(lambda s: Event(op="orphan_sweep", seconds=s), st.sampled_from((None, 2.0))),
        st.builds(  # an operator's choice on a parked call, zombies or not
            lambda run, c: Event(op="resolve", run=run, choice=c), _RUN, st.sampled_from(CHOICES)
        ),
    )


@st.composite
def _schedule(draw: st.DrawFn, max_events: int, drop_after: bool) -> list[Event]:
    """Events that mostly apply: run events pick among the runs started so far."""

    def kind() -> str | None:
        chosen = draw(st.sampled_from(KINDS))
        return None if chosen == DEFAULT_KIND else chosen

    started = [0]
    out = [Event(op="start", run=0, agent=kind())]
    for _ in range(draw(st.integers(0, max_events))):
        event = draw(events(drop_after=drop_after))
        if event.op == "start":
            if len(started) < RUNS:
                started.append(len(started))
                out.append(Event(op="start", run=started[-1], agent=kind()))
            continue
        if event.run is not None and event.run not in started:
            event = Event.from_json({**event.to_json(), "run": started[event.run % len(started)]})
        out.append(event)
    return out


def schedules(*, max_events: int = 12, drop_after: bool = True) -> st.SearchStrategy[list[Event]]:
    """A schedule that starts run r0 first; its other events name started runs."""
    return _schedule(max_events, drop_after)
