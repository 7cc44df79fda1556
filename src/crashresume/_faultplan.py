"""Fault scenarios (``faults=``): which to run, running them, and judging them.

Scenario ``run-<fault>-<k>``: the first start meets ``fault`` at its effect call k and goes on
as the subject decides (its own retry runs). When the fault ends that start (the step
raised), the subject is started again, as a supervisor restarts a process that died of an
unhandled error, and the restart runs every input with no fault. The scenario is then judged
as a crash scenario is, against the baseline; an extra effect that the faulted start made
itself, before any restart, is ``retry_duplicated`` instead of ``duplicate_effect``.

The plan runs, for every effect call k of the baseline, every fault kind asked for, after
the crash scenarios: ``run-lost-1, run-fail-1, run-lost-2, ...``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from crashresume._context import Context, ScenarioLog
from crashresume._errors import UsageError
from crashresume._faults import FAULTS, Fault, parse_fault_id
from crashresume._findings import Finding, FindingKind
from crashresume._judge import Judge
from crashresume._plan import Executor
from crashresume._report import Report
from crashresume._runner import Life, LifeSpec


def check_faults(faults: Any) -> tuple[str, ...]:
    """The fault kinds of ``conform(faults=...)``, in the order given, each once."""
    if faults is None:
        return ()
    if isinstance(faults, str | bytes):
        raise UsageError(
            f"faults must be a list of fault kinds, not a single {type(faults).__name__}; did "
            f"you mean faults=[{faults!r}]?"
        )
    if not isinstance(faults, Iterable):
        raise UsageError(
            f"faults must be a list of fault kinds; got {type(faults).__name__!r}. Use any of "
            f"{', '.join(map(repr, FAULTS))}"
        )
    kinds: dict[str, None] = {}
    for kind in faults:
        if kind not in FAULTS:
            raise UsageError(
                f"faults: {kind!r} is not a fault kind; use any of {', '.join(map(repr, FAULTS))}"
            )
        kinds[kind] = None
    return tuple(kinds)


def wanted_fault(only: str | None, calls: int) -> Fault | None:
    """The fault scenario ``only=`` names (None for any other id), checked against the plan."""
    fault = parse_fault_id(only)
    if fault is not None and fault.call > calls:
        raise UsageError(
            f"only={only!r} names effect call {fault.call}, but the baseline made {calls} "
            f"effect call(s): use a scenario id with k from 1 to {calls}"
        )
    return fault


class FaultRun:
    """The lives of one fault scenario: the faulted start, and a restart if it raised."""

    __slots__ = ("fault", "first", "lives", "log", "order", "run_id")

    def __init__(self, order: int, fault: Fault, run_id: str | None = None) -> None:
        self.order = order
        self.fault = fault
        self.run_id = fault.sid if run_id is None else run_id  # the Hypothesis mode's own
        self.log = ScenarioLog()
        self.lives: list[Life] = []
        self.first = 0  # effects performed when the faulted start ended (its own retries in)

    @property
    def sid(self) -> str:
        return self.fault.sid

    def next_spec(self) -> LifeSpec | None:
        if not self.lives:
            return LifeSpec(
                run_id=self.run_id,
                log=self.log,
                crash=None,
                restart=False,
                baseline=False,
                fault=self.fault,
            )
        first = self.lives[0]
        if len(self.lives) == 1 and first.error is not None and first.crash_step is None:
            return LifeSpec(
                run_id=self.run_id, log=self.log, crash=None, restart=True, baseline=False
            )
        return None

    def add(self, life: Life) -> None:
        if not self.lives:
            self.first = len(self.log.performed)
        self.lives.append(life)

    def notes(self) -> list[str]:
        notes = [note.replace(self.run_id, self.sid) for life in self.lives for note in life.notes]
        if self.lives and self.lives[0].calls < self.fault.call and self.lives[0].completed:
            notes.append(
                f"{self.sid}: the fault was never met (that start made only "
                f"{self.lives[0].calls} effect calls)"
            )
        return notes


def fault_runs(kinds: Sequence[str], calls: int) -> list[FaultRun]:
    """Every fault scenario of the plan: each kind at each effect call of the baseline."""
    faults = [Fault(kind=kind, call=call) for call in range(1, calls + 1) for kind in kinds]
    return [FaultRun(order, fault) for order, fault in enumerate(faults)]


def judge_fault_run(judge: Judge, run: FaultRun) -> list[Finding]:
    """The findings of one fault scenario."""
    lives = list(run.lives)
    if len(lives) > 1:  # the fault ended the first start: its restart is what is judged
        lives[0] = dataclasses.replace(lives[0], error=None, crash_step=0)
    findings = judge.scenario(run.sid, lives, run.log)
    if not judge.more_than_baseline(run.log.performed[: run.first]):
        return findings
    retried = []
    for finding in findings:
        if finding.kind is FindingKind.DUPLICATE_EFFECT:
            finding = dataclasses.replace(
                finding,
                kind=FindingKind.RETRY_DUPLICATED,
                message=f"{run.fault.describe()}; the subject's own retry performed it again: "
                + finding.message,
            )
        retried.append(finding)
    return retried


def run_faults(
    executor: Executor,
    factory: Callable[[Context], Any],
    items: list[Any],
    runs: Sequence[FaultRun],
    judge: Judge,
    report: Report,
) -> None:
    """Run and judge ``runs``; the report lists them in plan order."""
    finished: list[tuple[FaultRun, list[Finding]]] = []

    def done(run: FaultRun) -> list[FaultRun]:
        finished.append((run, judge_fault_run(judge, run)))
        return []

    executor.execute(factory, items, runs, done)
    for run, findings in sorted(finished, key=lambda pair: pair[0].order):
        report.scenarios.append(run.sid)
        report.findings.extend(findings)
        report.notes.extend(run.notes())
