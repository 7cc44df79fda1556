"""A Hypothesis state machine for your own agent: your rules, the harness's invariants.

Subclass ``ConformMachine``, say how to build the subject, and write rules that feed it
inputs, crash it and restart it in any order; Hypothesis interleaves them, and after every
rule the machine checks what ``conform`` checks::

    from hypothesis import strategies as st
    from hypothesis.stateful import rule
    from crashresume.stateful import ConformMachine

    class InvoicerMachine(ConformMachine):
        def make_agent(self, ctx):
            return Invoicer(ctx, LEDGERS.setdefault(ctx.run_id, {}))

        @rule(order=st.sampled_from(["o-1", "o-2", "o-3"]))
        def new_order(self, order):
            self.feed(order)

        @rule(before=st.booleans())
        def crash(self, before):
            self.crash_next_effect(before=before)

        @rule()
        def restart(self):
            self.restart_subject()

    TestInvoicer = InvoicerMachine.TestCase

Beside the subject runs a *reference*: a start of the same subject that is fed every input
as it comes and never crashes. The invariants, after every rule: no key is sent again with
other arguments (``key_conflict``); no effect happened more often than in the reference
(``duplicate_effect``); a start that is alive and has been fed every input has made every
effect the reference made (``effect_lost``) and has the same ``state()``
(``resume_diverged``); a restart never finds an empty ``state()`` once a start had finished
an input after which the reference's was not (``state_lost``). Teardown restarts a dead
subject and checks all of it once more. In-process only; needs ``crashresume[hypothesis]``.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Hashable
from typing import Any

from hypothesis.stateful import RuleBasedStateMachine, invariant

from crashresume._context import Context, ScenarioLog, running
from crashresume._errors import SimulatedCrash, UsageError
from crashresume._faults import arm, fault_met, faultable
from crashresume._judge import _freeze, describe_difference, show_effect
from crashresume._runner import Teardown, _open, _parts, is_empty, tear_down

_machines = itertools.count(1)  # run ids of machine instances, unique in this process


class _Start:
    """One start of the subject, kept alive across rules."""

    def __init__(self, machine: ConformMachine, run_id: str, log: ScenarioLog) -> None:
        self.ctx = faultable(Context, run_id, log)
        self.dead = False
        self.fed = 0  # inputs stepped to their end by this start
        self._teardown: Teardown | None = None
        made = self.call(machine.make_agent, self.ctx)
        if self.dead:
            return
        self.subject, self._teardown = _open(made)
        self._step, self._state = _parts(self.subject)

    def call(self, function: Any, *args: Any) -> Any:
        """Run subject code as this start; a crash ends the start."""
        ctx = self.ctx
        with running(ctx):
            ctx.enter_subject()
            try:
                return function(*args)
            except SimulatedCrash as exc:
                self.end(exc)
                return None
            except Exception as exc:
                if not fault_met(ctx):
                    raise
                self.end(exc)  # the fault ended this start: as conform, restart it
                return None
            finally:
                ctx.leave_subject()

    def step(self, item: Any) -> None:
        if not self.dead:
            self.call(self._step, item)
            if not self.dead:
                self.fed += 1

    def state(self) -> Any:
        return None if self._state is None or self.dead else self.call(self._state)

    @property
    def has_state(self) -> bool:
        return not self.dead and self._state is not None

    def end(self, crash: BaseException | None) -> None:
        """This start is over: crashed (``crash``) or stopped cleanly (None)."""
        if self.dead:
            return
        self.dead = True
        if crash is None or not isinstance(crash, SimulatedCrash):
            self.ctx._settle()  # a slow request still in flight lands
        self.ctx._stop()
        teardown, self._teardown = self._teardown, None
        failed = tear_down(teardown, crash)
        if failed is not None and crash is None:
            raise AssertionError(f"resume_crashed: close() raised: {failed}")


class ConformMachine(RuleBasedStateMachine):
    """Base class: define ``make_agent(self, ctx)`` and rules that use the methods below
    (``feed``, ``crash_next_effect``, ``fault_next_effect``, ``kill_subject``,
    ``restart_subject``)."""

    def __init__(self) -> None:
        super().__init__()
        self.run_id = f"machine-{next(_machines)}"
        self.inputs: list[Any] = []
        self._world = ScenarioLog()
        self._reference = _Start(self, f"{self.run_id}-reference", ScenarioLog())
        self._nonempty: list[bool] = []  # reference state() non-empty after each input
        self._finished = 0  # most inputs any start of the subject stepped to their end
        self._start: _Start | None = None
        self.starts = 0  # starts of the subject so far

    def make_agent(self, ctx: Context) -> Any:
        raise UsageError(
            f"{type(self).__name__} must define make_agent(self, ctx) returning the subject "
            "(key its durable state by ctx.run_id, as for conform)"
        )

    # -- for your rules -------------------------------------------------------------------

    def feed(self, item: Any) -> None:
        """A new input: the reference steps it, and so does the subject's running start
        (one is started, fed every earlier input first, if none runs)."""
        self.inputs.append(item)
        self._reference.step(item)
        reference_state = self._reference.state()
        self._nonempty.append(not is_empty(reference_state))
        if self._start is None or self._start.dead:
            self.restart_subject()
        else:
            self._start.step(item)
            self._finished = max(self._finished, self._start.fed)

    def crash_next_effect(self, *, before: bool = False) -> None:
        """The running start dies at its next effect call: right before it, or right after."""
        start = self._running()
        if start is None:
            return
        ctx = start.ctx
        if before:
            ctx._die_before = ctx._calls + 1
        else:
            ctx._die_after = ctx._calls + 1

    def fault_next_effect(self, kind: str) -> None:
        """The running start's next effect call meets fault ``kind`` (one of ``FAULTS``:
        'lost', 'fail', 'slow', 'rate_limited', 'malformed'); the subject's retry handles it,
        or the error it raises ends the start, which the next rule that needs it restarts."""
        start = self._running()
        if start is not None:
            arm(start.ctx, kind)

    def kill_subject(self) -> None:
        """The running start dies now, between two effect calls."""
        if self._start is not None and not self._start.dead:
            self._start.end(SimulatedCrash(f"crashresume: {self.run_id} killed by a rule"))

    def restart_subject(self) -> None:
        """Kill the running start (if any) and start the subject again: it is fed every
        input from the first, as ``conform`` feeds a restart."""
        self.kill_subject()
        start = self._start = _Start(self, self.run_id, self._world)
        self.starts += 1
        if start.has_state and self.starts > 1:
            empty = is_empty(start.state())
            if empty and self._finished and self._nonempty[self._finished - 1]:
                raise AssertionError(
                    f"state_lost: state() was empty right after restart {self.starts - 1}, "
                    f"although a start had finished {self._finished} input(s), after which "
                    "the reference's state() was not empty"
                )
        for item in self.inputs:
            start.step(item)
        self._finished = max(self._finished, start.fed)

    def _running(self) -> _Start | None:
        if self._start is None or self._start.dead:
            self.restart_subject()
        start = self._start
        return None if start is None or start.dead else start

    # -- the harness's invariants ---------------------------------------------------------

    @staticmethod
    def _counts(log: ScenarioLog) -> Counter[Hashable]:
        return Counter((name, _freeze(arg)) for name, arg in log.performed)

    def _shown(self, key: Hashable) -> str:
        for name, arg in self._world.performed + self._reference.ctx._performed:
            if (name, _freeze(arg)) == key:
                return show_effect(name, arg)
        return repr(key)

    @invariant()
    def no_key_conflict(self) -> None:
        if self._world.conflicts:
            key, first_name, first_arg, name, arg = self._world.conflicts[0]
            raise AssertionError(
                f"key_conflict: key {key!r} was first sent with "
                f"{show_effect(first_name, first_arg)}, then with {show_effect(name, arg)}"
            )

    @invariant()
    def no_duplicate_effect(self) -> None:
        reference = self._counts(self._reference_log())
        for key, count in self._counts(self._world).items():
            if count > reference.get(key, 0):
                raise AssertionError(
                    f"duplicate_effect: {self._shown(key)} happened {count} time(s), "
                    f"{reference.get(key, 0)} in the crash-free reference"
                )

    @invariant()
    def caught_up_start_matches_the_reference(self) -> None:
        start = self._start
        if start is None or start.dead or start.fed < len(self.inputs):
            return
        reference = self._counts(self._reference_log())
        world = self._counts(self._world)
        for key, count in reference.items():
            if world.get(key, 0) < count:
                raise AssertionError(
                    f"effect_lost: {self._shown(key)} happened {world.get(key, 0)} time(s), "
                    f"{count} in the crash-free reference"
                )
        if start.has_state and self._reference.has_state:
            expected, actual = self._reference.state(), start.state()
            if expected != actual:
                raise AssertionError(
                    f"resume_diverged: state() is not the reference's: "
                    f"{describe_difference(expected, actual)}"
                )

    def _reference_log(self) -> ScenarioLog:
        log = ScenarioLog()
        log.performed = self._reference.ctx._performed
        return log

    def teardown(self) -> None:
        try:
            if self.inputs and (self._start is None or self._start.dead):
                self.restart_subject()
            self.no_key_conflict()
            self.no_duplicate_effect()
            self.caught_up_start_matches_the_reference()
        finally:
            for start in (self._start, self._reference):
                if start is not None:
                    start.end(None)
