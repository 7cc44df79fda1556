"""Comparing a scenario with the baseline, and turning each difference into a ``Finding``.

Effects are compared as a multiset of ``(name, arg)``: the order may change after a resume,
the number of times each logical effect really happened may not. Keys identify an effect to
the idempotent remote only; they are not compared across scenarios (a fresh key per attempt
is exactly the bug ``duplicate_effect`` exists to catch).
"""

from __future__ import annotations

import reprlib
from collections import Counter
from collections.abc import Hashable, Sequence
from typing import Any

from crashresume._context import Conflict, Effect, ScenarioLog
from crashresume._findings import Finding, FindingKind
from crashresume._report import Rerun
from crashresume._runner import Life
from crashresume._scenarios import BASELINE_ID, REPEAT_ID

_SHOWN_EFFECTS = 3  # differing effects a message spells out before "and N more"

_short = reprlib.Repr()
_short.maxstring = 60
_short.maxother = 60
_short.maxlist = _short.maxtuple = _short.maxset = _short.maxdict = 6


def _freeze(value: Any) -> Hashable:
    """A hashable stand-in that is equal for equal values (dicts, lists and sets included)."""
    if isinstance(value, dict):
        items = ((_freeze(k), _freeze(v)) for k, v in value.items())
        return ("dict", tuple(sorted(items, key=repr)))
    if isinstance(value, list | tuple):
        return tuple(_freeze(item) for item in value)
    if isinstance(value, set | frozenset):
        return frozenset(_freeze(item) for item in value)
    try:
        hash(value)
    except TypeError:
        return ("repr", repr(value))
    return value  # type: ignore[no-any-return]


def show_effect(name: str, arg: Any) -> str:
    return f"{name}({_short.repr(arg)})"


def _times(count: int) -> str:
    return "once" if count == 1 else f"{count} times"


def _some(items: Sequence[str]) -> str:
    shown = "; ".join(items[:_SHOWN_EFFECTS])
    hidden = len(items) - _SHOWN_EFFECTS
    return shown + (f"; and {hidden} more" if hidden > 0 else "")


def describe_difference(expected: Any, actual: Any) -> str:
    """A short account of how ``actual`` differs from ``expected``."""
    if isinstance(expected, dict) and isinstance(actual, dict):
        missing = [k for k in expected if k not in actual]
        extra = [k for k in actual if k not in expected]
        changed = [k for k in expected if k in actual and expected[k] != actual[k]]
        parts = []
        if missing:
            parts.append(f"missing keys {_short.repr(missing)}")
        if extra:
            parts.append(f"extra keys {_short.repr(extra)}")
        for k in changed[:_SHOWN_EFFECTS]:
            parts.append(
                f"[{_short.repr(k)}] is {_short.repr(actual[k])}, "
                f"baseline {_short.repr(expected[k])}"
            )
        if parts:
            return "; ".join(parts)
    if isinstance(expected, set | frozenset) and isinstance(actual, set | frozenset):
        parts = []
        if expected - actual:
            parts.append(f"missing {_short.repr(sorted(expected - actual, key=repr))}")
        if actual - expected:
            parts.append(f"extra {_short.repr(sorted(actual - expected, key=repr))}")
        if parts:
            return "; ".join(parts)
    return f"{_short.repr(actual)}, baseline {_short.repr(expected)}"


def make_finding(rerun: Rerun, kind: FindingKind, scenario: str, message: str) -> Finding:
    return Finding(
        kind=kind,
        scenario=scenario,
        message=message,
        rerun=rerun.python(scenario),
        rerun_cli=rerun.cli(scenario),
    )


def hang_message(who: str, life: Life, inputs: Sequence[Any]) -> str:
    """What a start that ran out of time was doing: '<who> did not finish within ...'."""
    if life.stepping < 0:
        where = "while make_agent(ctx) ran"
    elif life.stepping < len(inputs):
        item = _short.repr(inputs[life.stepping])
        where = f"while stepping input {life.stepping + 1} of {len(inputs)} ({item})"
    else:
        where = "after its last input"
    return f"{who} {life.timed_out}, {where}"


class Judge:
    """Holds what the baseline did and judges every scenario against it."""

    def __init__(
        self, baseline: Life, log: ScenarioLog, rerun: Rerun, inputs: Sequence[Any]
    ) -> None:
        self._baseline = baseline
        self._inputs = inputs
        self._performed = log.performed
        self._conflicted_keys = {conflict[0] for conflict in log.conflicts}
        self._baseline_conflicts = log.conflicts
        self._rerun = rerun
        self._frozen = False  # switched on for good the first time an arg is unhashable
        self._counts = self._count(log.performed)
        self.exempt: frozenset[str] = frozenset()  # effect names only absolute rules judge

    def _finding(self, kind: FindingKind, scenario: str, message: str) -> Finding:
        return make_finding(self._rerun, kind, scenario, message)

    def _count(self, performed: list[Effect]) -> Counter[Hashable]:
        if not self._frozen:
            try:
                return Counter(performed)
            except TypeError:
                self._frozen = True
                self._counts = self._count(self._performed)
        return Counter((name, _freeze(arg)) for name, arg in performed)

    def more_than_baseline(self, performed: list[Effect]) -> bool:
        """Some effect of ``performed`` happened more often than in the baseline."""
        baseline = self._counts
        return any(
            n > baseline.get(k, 0) and k[0] not in self.exempt  # type: ignore[index]
            for k, n in self._count(performed).items()
        )

    def _shown(self, performed: list[Effect], wanted: set[Hashable]) -> dict[Hashable, str]:
        """Readable names for the counted effects in ``wanted``, from their original args."""
        shown: dict[Hashable, str] = {}
        for name, arg in performed:
            counted = (name, _freeze(arg)) if self._frozen else (name, arg)
            if counted in wanted and counted not in shown:
                shown[counted] = show_effect(name, arg)
        return shown

    def _conflict_message(self, conflicts: list[Conflict]) -> str:
        items = [
            f"key {_short.repr(key)} was first sent with {show_effect(first_name, first_arg)}, "
            f"then with {show_effect(name, arg)}"
            for key, first_name, first_arg, name, arg in conflicts
        ]
        return (
            _some(items) + "; the remote answered with the first result and ignored the "
            "new arguments"
        )

    def baselines(self, repeat: Life, repeat_log: ScenarioLog) -> list[Finding]:
        """Findings of the two crash-free runs: nondeterminism, and key conflicts of their own."""
        findings = []
        first, second = self._performed, repeat_log.performed
        difference = None
        if first != second:
            index = next(
                (i for i, (a, b) in enumerate(zip(first, second, strict=False)) if a != b),
                min(len(first), len(second)),
            )
            one = show_effect(*first[index]) if index < len(first) else "nothing"
            two = show_effect(*second[index]) if index < len(second) else "nothing"
            difference = (
                f"new effect {index + 1} was {one} in {BASELINE_ID!r} but {two} in "
                f"{REPEAT_ID!r} ({len(first)} vs {len(second)} new effects)"
            )
        elif self._baseline.has_state and repeat.final_state != self._baseline.final_state:
            state = describe_difference(self._baseline.final_state, repeat.final_state)
            difference = f"the final state() differs: {state}"
        if difference is not None:
            findings.append(
                self._finding(
                    FindingKind.NONDETERMINISTIC_BASELINE,
                    BASELINE_ID,
                    f"two crash-free runs of the same inputs differ: {difference}. Crash "
                    "scenarios were not run: make effect args and state() depend only on the "
                    "inputs and the durable state (no clock, random ids or global counters).",
                )
            )
        if self._baseline_conflicts:
            findings.append(
                self._finding(
                    FindingKind.KEY_CONFLICT,
                    BASELINE_ID,
                    "without any crash: " + self._conflict_message(self._baseline_conflicts),
                )
            )
        return findings

    def scenario(self, scenario: str, lives: list[Life], log: ScenarioLog) -> list[Finding]:
        """Every finding of one crash scenario, given its lives in order."""
        findings = []
        last = lives[-1]
        for index, life in enumerate(lives):
            if life.timed_out is not None:
                who = "the first run (before its crash point)" if index == 0 else f"resume {index}"
                message = hang_message(who, life, self._inputs)
                findings.append(self._finding(FindingKind.TIMEOUT, scenario, message))
            if life.error is not None:
                who = (
                    "the first run (before its crash point) raised; it should have repeated "
                    "the baseline, so state may be leaking between scenarios (key durable "
                    "state by ctx.run_id)"
                    if index == 0
                    else f"resume {index} raised"
                )
                findings.append(
                    self._finding(FindingKind.RESUME_CRASHED, scenario, f"{who}: {life.error}")
                )
        counts = self._count(log.performed)
        baseline = self._counts
        if not dict.__eq__(counts, baseline):  # Counter's own == is slow and zero-aware
            exempt = self.exempt
            more = {
                k: n
                for k, n in counts.items()
                if n > baseline.get(k, 0) and k[0] not in exempt  # type: ignore[index]
            }
            if more:
                shown = self._shown(log.performed, set(more))
                items = [
                    f"{shown[k]} happened {_times(n)}, "
                    f"{_times(baseline[k]) if k in baseline else 'never'} in the baseline"
                    for k, n in more.items()
                ]
                findings.append(self._finding(FindingKind.DUPLICATE_EFFECT, scenario, _some(items)))
            fewer = {
                k: n
                for k, n in baseline.items()
                if counts.get(k, 0) < n and k[0] not in exempt  # type: ignore[index]
            }
            if fewer and last.completed:
                shown = self._shown(self._performed, set(fewer))
                items = [
                    f"{shown[k]} "
                    + (f"happened {_times(counts[k])}" if counts.get(k) else "never happened")
                    + f", {_times(n)} in the baseline"
                    for k, n in fewer.items()
                ]
                findings.append(self._finding(FindingKind.EFFECT_LOST, scenario, _some(items)))
        new_conflicts = [c for c in log.conflicts if c[0] not in self._conflicted_keys]
        if new_conflicts:
            findings.append(
                self._finding(
                    FindingKind.KEY_CONFLICT, scenario, self._conflict_message(new_conflicts)
                )
            )
        if self._baseline.has_state:
            lost = self._state_lost(lives)
            if lost is not None:
                findings.append(self._finding(FindingKind.STATE_LOST, scenario, lost))
            if last.completed and last.final_state != self._baseline.final_state:
                difference = describe_difference(self._baseline.final_state, last.final_state)
                findings.append(
                    self._finding(
                        FindingKind.RESUME_DIVERGED,
                        scenario,
                        f"the final state() after the resume differs: {difference}",
                    )
                )
        return findings

    def _state_lost(self, lives: list[Life]) -> str | None:
        """Why a restart's empty state() counts as lost, or None when it does not."""
        nonempty = self._baseline.nonempty or []
        committed: str | None = None
        for index, life in enumerate(lives):
            if index > 0 and life.start_empty is not None:
                if life.start_empty and committed is not None:
                    return f"state() was empty right after restart {index}, although {committed}"
                if not life.start_empty:
                    committed = f"restart {index} had found a non-empty state()"
            step = life.crash_step
            if committed is None and step is not None and step >= 1 and nonempty[step - 1]:
                committed = (
                    f"the crashed run had finished {_plural_inputs(step)}, after which the "
                    "baseline's state() was not empty"
                )
        return None


def _plural_inputs(count: int) -> str:
    return "1 input" if count == 1 else f"{count} inputs"
