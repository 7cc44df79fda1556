"""Overlapping lives: the scenario kind where the old start is frozen, not killed.

``conform(..., scenarios=["crash", "overlap"])`` adds, for every crash point of the baseline,
the scenario ``run-overlap-<k>`` (``run-overlap-before-<k>``): what a lease expiry does in
production. Four lives share the scenario's run id and world:

1. the first start runs until right after (before) effect call k and is frozen there
   (``_frozen``: a stopped process in process mode, a parked thread in-process);
2. a restart runs every input to its end meanwhile, as the new owner would;
3. the first start is woken: the effect call it stood in goes ahead, it finishes the input
   it was stepping, and it is ended (as its next lease check or the supervisor would);
4. a fresh start that steps nothing reads ``state()``: what the world holds now.

Judged like a crash scenario (the first start counted as crashed at its freeze point, the
restart as the resume), plus the finding ``overlap`` when the woken start changed the world
anyway: it performed a new effect (not a keyed replay the remote answered from memory), or
the state its restart had left differs once it finished. The message tells who did what,
in order. A subject that fences (its store holds a generation or lease every start takes
over, and every write or effect checks it first) passes; raising when fenced is fine: the
woken start's own error or crash is never a finding.
"""

from __future__ import annotations

import reprlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from crashresume._context import Context, Effect, ScenarioLog
from crashresume._errors import UsageError
from crashresume._findings import Finding, FindingKind
from crashresume._frozen import frozen_start
from crashresume._judge import Judge, hang_message, make_finding, show_effect
from crashresume._plan import Executor
from crashresume._repeat import Outcome, add_tally, repetition_id
from crashresume._report import Report, Rerun
from crashresume._runner import Life, LifeSpec
from crashresume._scenarios import Point, overlap_id

SCENARIO_KINDS = ("crash", "overlap")  # what conform(scenarios=...) accepts
DEFAULT_KINDS = ("crash",)
_ORDER = 1 << 30  # overlap scenarios come after every crash scenario in the report

_short = reprlib.Repr()
_short.maxstring = 60
_short.maxother = 80
_short.maxlist = _short.maxtuple = _short.maxset = _short.maxdict = 6


def scenario_kinds(value: Any) -> tuple[str, ...]:
    """The scenario kinds ``scenarios=`` names, in plan order; a UsageError for anything else."""
    kinds = (value,) if isinstance(value, str) else value
    advice = (
        "use 'crash' (die at each boundary, then restart), 'overlap' (freeze at each "
        "boundary, run the restart, then wake the old start) or both, e.g. "
        "scenarios=['crash', 'overlap']"
    )
    if not isinstance(kinds, Iterable):
        raise UsageError(f"scenarios={value!r}: {advice}")
    kinds = tuple(kinds)
    unknown = [kind for kind in kinds if kind not in SCENARIO_KINDS]
    if unknown or not kinds:
        what = f"{unknown[0]!r} is not a scenario kind" if unknown else "no scenario kind given"
        raise UsageError(f"scenarios={value!r}: {what}; {advice}")
    return tuple(kind for kind in SCENARIO_KINDS if kind in kinds)


@dataclass(slots=True, kw_only=True)
class _Overlap:
    """What the lives of one overlap scenario did."""

    sid: str
    point: Point
    log: ScenarioLog
    first: Life | None = None  # the first start, when it ended before reaching its point
    frozen_step: int = -1
    restart: Life | None = None
    woken: Life | None = None
    observed: Life | None = None  # the fresh start that only read state()
    marks: tuple[int, int, int] = (0, 0, 0)  # len(performed) at the freeze, after 2, after 3


def _run(
    executor: Executor,
    factory: Callable[[Context], Any],
    items: list[Any],
    sid: str,
    point: Point,
    timeout: float | None,
    has_state: bool,
) -> _Overlap:
    log = ScenarioLog()
    run = _Overlap(sid=sid, point=point, log=log)
    old = frozen_start(executor.mode, factory, items, sid, log, point, timeout)
    try:
        run.first = old.freeze()
        if run.first is not None:
            return run
        run.frozen_step = old.frozen_step
        frozen = len(log.performed)
        spec = LifeSpec(run_id=sid, log=log, crash=None, restart=True, baseline=False)
        run.restart = executor.life(factory, items, spec)
        restarted = len(log.performed)
        run.woken = old.wake()
        run.marks = (frozen, restarted, len(log.performed))
    finally:
        old.close()
    if has_state:
        run.observed = executor.life(factory, [], spec)
    return run


def _effects(performed: Sequence[Effect]) -> str:
    if not performed:
        return "no new effect"
    return ", ".join(show_effect(name, arg) for name, arg in performed)


def _stepping(step: int, inputs: Sequence[Any]) -> str:
    if step < 0:
        return "while make_agent(ctx) ran"
    return f"while stepping input {step + 1} of {len(inputs)} ({_short.repr(inputs[step])})"


def _overlap_message(run: _Overlap, inputs: Sequence[Any]) -> str | None:
    """The ``overlap`` finding's message, or None when the woken start changed nothing."""
    assert run.restart is not None and run.woken is not None
    frozen, restarted, woken = run.marks
    performed = run.log.performed
    acted = performed[restarted:woken]
    observed = run.observed
    overwrote = (
        observed is not None
        and run.restart.completed
        and observed.completed
        and observed.final_state != run.restart.final_state
    )
    if not acted and not overwrote:
        return None
    parts = [
        f"the first run froze {run.point.describe()} {_stepping(run.frozen_step, inputs)}; "
        f"in order: the first run made {_effects(performed[:frozen])}; resume 1 ran while it "
        f"was frozen and made {_effects(performed[frozen:restarted])}; the first run, woken, "
        f"made {_effects(acted)}"
    ]
    if overwrote:
        assert observed is not None
        parts.append(
            f"state() was {_short.repr(run.restart.final_state)} when resume 1 ended and "
            f"{_short.repr(observed.final_state)} once the woken run finished: it overwrote "
            "what its restart had written"
        )
    parts.append(
        "a start that lost the run must stop before it acts or writes: fence with a "
        "generation or lease in the store that every start takes over"
    )
    return "; ".join(parts)


def _judge(
    judge: Judge, rerun: Rerun, run: _Overlap, inputs: Sequence[Any]
) -> tuple[list[Finding], list[str]]:
    if run.first is not None:
        if run.first.timed_out is not None:
            message = hang_message("the first run (before its freeze point)", run.first, inputs)
            return [make_finding(rerun, FindingKind.TIMEOUT, run.sid, message)], []
        return [], [f"{run.sid}: the freeze point was never reached"]
    assert run.restart is not None and run.woken is not None
    crashed = Life(calls=run.point.call, crash_step=run.frozen_step)
    findings = judge.scenario(run.sid, [crashed, run.restart], run.log)
    notes = list(run.restart.notes)
    if run.woken.timed_out is not None:
        message = hang_message("the first run, woken,", run.woken, inputs)
        findings.append(make_finding(rerun, FindingKind.TIMEOUT, run.sid, message))
    overlap = _overlap_message(run, inputs)
    if overlap is not None:
        findings.append(make_finding(rerun, FindingKind.OVERLAP, run.sid, overlap))
    if run.observed is not None and run.observed.error is not None:
        notes.append(
            f"{run.sid}: the start that read state() at the end raised: {run.observed.error}"
        )
    return findings, notes


def explore_overlaps(
    executor: Executor,
    factory: Callable[[Context], Any],
    items: list[Any],
    points: Sequence[Point],
    judge: Judge,
    rerun: Rerun,
    report: Report,
    *,
    repeat: int,
    timeout: float | None,
    has_state: bool,
) -> None:
    """Run the overlap scenario of every point (each ``repeat`` times) and judge it.

    Overlap scenarios run one at a time: two of their lives run at once already.
    """
    outcomes: list[Outcome] = []
    for index, point in enumerate(points):
        scenario = overlap_id(point)
        for rep in range(1, repeat + 1):
            sid = scenario if repeat == 1 else repetition_id(scenario, rep)
            run = _run(executor, factory, items, sid, point, timeout, has_state)
            findings, said = _judge(judge, rerun, run, items)
            notes = [note.replace(sid, scenario) for note in said]
            outcomes.append(
                Outcome(
                    order=(_ORDER, index),
                    rep=rep,
                    scenario=scenario,
                    findings=findings,
                    notes=notes,
                )
            )
    if repeat > 1:
        add_tally(report, rerun, outcomes)
        return
    for outcome in outcomes:
        report.scenarios.append(outcome.scenario)
        report.findings.extend(outcome.findings)
        report.notes.extend(outcome.notes)
