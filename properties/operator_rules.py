"""The state machine's rules for an operator mid-step (:mod:`properties.operators`).

A mixin of :class:`~properties.machine.ScheduleMachine`: Hypothesis collects rules from
every base. Each composite rule lands an operator's action while a worker of the run
stands at a gate, and a crash or a restart right after it: the combination the suite
never generated before issue 21.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar, Final

from hypothesis import strategies as st
from hypothesis.stateful import precondition, rule

from .events import GATES, RESOLVE_CHOICES, RUNS, Event
from .runner import SETTINGS, ScheduleRunner

PICK: Final = st.integers(0, RUNS - 1)
SEQ: Final = st.sampled_from((None, 0, 1, 2, 3))
POINT: Final = st.sampled_from(GATES)  # a step's gates and a retry's backoff wait
LAPSE: Final = SETTINGS.lease + 1  # seconds after which a dead worker's lease has expired


class OperatorRules:
    """``cancel``, ``retry`` and ``resolve --<choice>`` rules; ScheduleMachine supplies the
    rest."""

    runner: ClassVar[ScheduleRunner]

    if TYPE_CHECKING:  # what ScheduleMachine, the class this is mixed into, provides

        def _do(self, *events: Event) -> None: ...

        def _pick(self, which: str, pick: int) -> int: ...

        def _can(self, which: str) -> bool: ...

    @precondition(lambda self: bool(self.runner.started))
    @rule(pick=PICK, op=st.sampled_from(("cancel", "retry")))
    def operator(self, pick: int, op: str) -> None:
        """An operator cancels or retries a run, whatever it is doing (a refusal is traced)."""
        self._do(Event(op=op, run=self._pick("started", pick)))

    @precondition(lambda self: self._can("active"))
    @rule(pick=PICK, point=POINT, seq=SEQ, then=st.sampled_from(("step", "crash", "kill")))
    def cancel_midstep(self, pick: int, point: str, seq: int | None, then: str) -> None:
        """Cancelled while its worker stands at ``point``: the worker goes on or dies there, a
        new one is started on the run, a sweep comes by. Nothing of it may be accepted."""
        run = self._pick("active", pick)
        on = Event(op="step", run=run)
        if then != "step":
            on = Event(op="crash", run=run, point=point, seq=seq, kill=then == "kill")
        pause = Event(op="pause", run=run, point=point, seq=seq)
        cancel = Event(op="cancel", run=run)
        self._do(pause, cancel, on, Event(op="restart", run=run), Event(op="sweep"))

    @precondition(lambda self: self._can("active"))
    @rule(pick=PICK, point=POINT, seq=SEQ, how=st.sampled_from(("expired", "backoff", "live")))
    def retry_midstep(self, pick: int, point: str, seq: int | None, how: str) -> None:
        """Retried after its worker died at ``point`` (its lease expired), while it backs off
        after bad answers, or while its worker lives there (refused); then it goes on."""
        run = self._pick("active", pick)
        retry, now = Event(op="retry", run=run), Event(op="sweep", seconds=0.0)
        if how == "expired":
            lapse = Event(op="tick", seconds=LAPSE)
            self._do(Event(op="crash", run=run, point=point, seq=seq), lapse, retry, now)
        elif how == "backoff":
            bad = Event(op="model_fault", fault="malformed", n=2)
            pause = Event(op="pause", run=run, point="before_decide", seq=seq)
            self._do(pause, bad, Event(op="step", run=run), retry, now)
        else:
            pause = Event(op="pause", run=run, point=point, seq=seq)
            self._do(pause, retry, Event(op="step", run=run))

    @precondition(lambda self: self._can("attention"))
    @rule(pick=PICK, choice=st.sampled_from(RESOLVE_CHOICES), point=POINT, kill=st.booleans())
    def resolve_midstep(self, pick: int, choice: str, point: str, kill: bool) -> None:
        """An operator decides a parked call (a zombie of the run may wait at a gate), the
        run is claimed at once, and its new worker dies at the next ``point``."""
        run = self._pick("attention", pick)
        resolve = Event(op="resolve", run=run, choice=choice)
        crash = Event(op="crash", run=run, point=point, kill=kill)
        self._do(resolve, Event(op="sweep", seconds=0.0), crash, Event(op="restart", run=run))
