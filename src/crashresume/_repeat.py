"""``repeat=N``: every scenario N times, each finding with how many of the N showed it.

A race (two writes whose order nothing enforces, a background flush against the next
effect call) shows in some runs of a scenario and not in others, so one run of each
scenario proves little. With ``repeat=N`` every scenario of the plan runs N times, each
repetition with a run id of its own (``<scenario id>-r<i>``, i from 1 to N) so durable state
keyed by ``ctx.run_id`` never leaks from one repetition into the next. Repetitions are
independent scenarios: with ``mode="process", workers=W`` they run W at a time.

The report then has one finding per scenario and kind, under the scenario's own id, with
``repeats="3/20"``: 3 of the 20 repetitions of that scenario showed it; its message is the
first of those repetitions'. With ``crashes=2`` each repetition takes its second crash
points from its own resume, so a follow-up scenario may run in fewer than N repetitions:
the count's denominator is how many ran it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from crashresume._context import Context
from crashresume._findings import Finding, FindingKind
from crashresume._judge import Judge
from crashresume._plan import Executor, ScenarioRun
from crashresume._report import Report, Rerun
from crashresume._scenarios import Point, points_for, scenario_id


def repetition_id(scenario: str, rep: int) -> str:
    """The run id of repetition ``rep`` (from 1) of ``scenario``: ``run-3-r2``."""
    return f"{scenario}-r{rep}"


@dataclass(frozen=True, slots=True, kw_only=True)
class Outcome:
    """What one repetition of one scenario found."""

    order: tuple[int, ...]  # the scenario's place in the plan
    rep: int  # which repetition, from 1
    scenario: str  # the scenario's own id (without the repetition's suffix)
    findings: list[Finding]
    notes: list[str]


class RepeatedRun(ScenarioRun):
    """One repetition of a crash scenario: its own run id, its scenario's id kept apart."""

    __slots__ = ("base", "rep")

    def __init__(self, order: tuple[int, ...], points: tuple[Point, ...], rep: int) -> None:
        base = scenario_id(points)
        super().__init__(order, points, sid=repetition_id(base, rep))
        self.base = base
        self.rep = rep


def explore_repeated(
    executor: Executor,
    factory: Callable[[Context], Any],
    items: list[Any],
    roots: Sequence[tuple[Point, ...]],
    crashes: int,
    judge: Judge,
    rerun: Rerun,
    report: Report,
    repeat: int,
) -> None:
    """``_conform._explore`` with every scenario run ``repeat`` times, then tallied."""
    outcomes: list[Outcome] = []

    def done(run: RepeatedRun) -> list[RepeatedRun]:
        findings = judge.scenario(run.sid, run.lives, run.log)
        notes = [note.replace(run.sid, run.base) for note in run.notes()]
        outcomes.append(
            Outcome(order=run.order, rep=run.rep, scenario=run.base, findings=findings, notes=notes)
        )
        if not run.complete or len(run.points) >= crashes:
            return []
        return [
            RepeatedRun((*run.order, i), (*run.points, point), run.rep)
            for i, point in enumerate(points_for(run.lives[-1].calls))
        ]

    runs = [
        RepeatedRun((i,), points, rep)
        for i, points in enumerate(roots)
        for rep in range(1, repeat + 1)
    ]
    executor.execute(factory, items, runs, done)
    add_tally(report, rerun, outcomes)


def add_tally(report: Report, rerun: Rerun, outcomes: list[Outcome]) -> None:
    """Fold the repetitions' findings into one per scenario and kind, with its count."""
    outcomes = sorted(outcomes, key=lambda outcome: (outcome.order, outcome.rep))
    runs: dict[str, int] = {}
    tally: dict[tuple[str, FindingKind], list[Any]] = {}  # -> [count, first finding]
    notes: dict[str, None] = {}
    for outcome in outcomes:
        runs[outcome.scenario] = runs.get(outcome.scenario, 0) + 1
        for kind in dict.fromkeys(finding.kind for finding in outcome.findings):
            first = next(f for f in outcome.findings if f.kind == kind)
            tally.setdefault((outcome.scenario, kind), [0, first])[0] += 1
        notes.update(dict.fromkeys(outcome.notes))
    report.scenarios.extend(runs)
    for (scenario, _), (count, first) in tally.items():
        report.findings.append(
            dataclasses.replace(
                first,
                scenario=scenario,
                rerun=rerun.python(scenario),
                rerun_cli=rerun.cli(scenario),
                repeats=f"{count}/{runs[scenario]}",
            )
        )
    report.notes.extend(notes)
