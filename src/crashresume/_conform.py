"""``conform``: run the baselines, plan the crash scenarios, run and judge each one."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from crashresume._context import Context, ScenarioLog
from crashresume._errors import BaselineError, UsageError
from crashresume._findings import FindingKind
from crashresume._forked import ForkedRunner
from crashresume._judge import Judge
from crashresume._progress import Progress
from crashresume._report import Report, Rerun
from crashresume._runner import InProcessRunner, Life, Runner
from crashresume._scenarios import (
    BASELINE_ID,
    REPEAT_ID,
    Point,
    parse_scenario_id,
    points_for,
    scenario_id,
)

_log = logging.getLogger(__name__)

MODES = ("inprocess", "process")  # "inprocess": raise SimulatedCrash; "process": fork + os._exit
DEFAULT_CRASHES = 1  # crashes per scenario: every point before and after each effect call


def _runner_for(mode: str) -> Runner:
    if mode == "inprocess":
        return InProcessRunner()
    if mode == "process":
        return ForkedRunner()
    raise UsageError(f"mode={mode!r} is not a mode; use one of {', '.join(map(repr, MODES))}")


def _check_arguments(make_agent: Any, inputs: Any, crashes: Any) -> list[Any]:
    if not callable(make_agent):
        raise UsageError(
            f"make_agent must be callable as make_agent(ctx) and return the subject; got "
            f"{type(make_agent).__name__!r}. Pass the factory itself, not its result."
        )
    if isinstance(inputs, str | bytes):
        raise UsageError(
            f"inputs must be a list of inputs, not a single {type(inputs).__name__}; "
            f"did you mean inputs=[{inputs!r}]?"
        )
    if not isinstance(inputs, Iterable):
        raise UsageError(f"inputs must be a list of inputs; got {type(inputs).__name__!r}")
    if isinstance(crashes, bool) or not isinstance(crashes, int) or crashes < 1:
        raise UsageError(
            f"crashes={crashes!r}: use 1 (one crash per scenario) or more (crashes=2 also "
            "crashes once during each recovery)"
        )
    return list(inputs)


def conform(
    make_agent: Callable[[Context], Any],
    inputs: Iterable[Any],
    *,
    crashes: int = DEFAULT_CRASHES,
    mode: str = "inprocess",
    only: str | None = None,
) -> Report:
    """Crash the subject at every side-effect boundary, restart it, and report what went wrong.

    ``make_agent(ctx)`` is called once per start and returns an object with ``step(input)``
    (and optionally ``state()``). The baseline feeds every input to one start, twice; each
    crash scenario dies at one boundary (right before or right after an effect call), starts
    the subject again and feeds every input again from the first. ``crashes=2`` also dies once
    during each recovery. ``only="run-3"`` runs just that scenario (plus the baselines).
    """
    items = _check_arguments(make_agent, inputs, crashes)
    wanted = None if only is None else parse_scenario_id(only)
    runner = _runner_for(mode)
    base_log, repeat_log = ScenarioLog(), ScenarioLog()
    base = _baseline(runner, make_agent, items, BASELINE_ID, base_log)
    repeat = _baseline(runner, make_agent, items, REPEAT_ID, repeat_log)
    rerun = Rerun(make_agent, items, mode)
    judge = Judge(base, base_log, rerun)
    report = Report(
        subject=rerun.name,
        inputs=len(items),
        mode=runner.mode,
        crashes=crashes if wanted is None else max(len(wanted), 1),
        baseline_effects=base.calls,
    )
    report.findings.extend(judge.baselines(repeat, repeat_log))
    if FindingKind.NONDETERMINISTIC_BASELINE in report.kinds():
        report.notes.append("crash scenarios were skipped: the baseline is not deterministic")
        return report
    if base.calls == 0:
        report.notes.append(
            "the subject made no ctx.effect call, so there is no boundary to crash at and it "
            "passes trivially; route its side effects through ctx.effect to test it (if it "
            "did make calls before, its durable state is left over from an earlier conform "
            "call: give every conform call fresh stores)"
        )
        return report
    if wanted is not None:
        if wanted:
            _check_only(only, wanted, base.calls)
            _run(runner, make_agent, items, wanted, judge, report)
        return report
    progress = Progress(f"conform {rerun.name}")
    try:
        _explore(runner, make_agent, items, (), base.calls, crashes, judge, report, progress)
    finally:
        progress.close()
    return report


def _baseline(
    runner: Runner,
    factory: Callable[[Context], Any],
    items: list[Any],
    run_id: str,
    log: ScenarioLog,
) -> Life:
    life = runner.life(factory, items, run_id, log, None, restart=False, baseline=True)
    if not life.completed:
        raise BaselineError(
            f"the crash-free baseline {run_id!r} did not finish: {life.error}. conform needs a "
            "subject that gets through all its inputs without a crash first; fix that, then "
            "test its resume."
        )
    return life


def _check_only(only: str | None, wanted: tuple[Point, ...], calls: int) -> None:
    if wanted[0].call > calls:
        raise UsageError(
            f"only={only!r} names effect call {wanted[0].call}, but the baseline made "
            f"{calls} effect call(s): use a scenario id with k from 1 to {calls}"
        )


def _run(
    runner: Runner,
    factory: Callable[[Context], Any],
    items: list[Any],
    points: Sequence[Point],
    judge: Judge,
    report: Report,
) -> list[Life] | None:
    """Run and judge one scenario; its lives, or None when a crash point was never reached."""
    sid = scenario_id(points)
    log = ScenarioLog()
    lives: list[Life] = []
    plan: tuple[Point | None, ...] = (*points, None)
    for index, point in enumerate(plan):
        life = runner.life(factory, items, sid, log, point, restart=index > 0, baseline=False)
        lives.append(life)
        if life.swallowed:
            report.notes.append(
                f"{sid}: the subject caught the injected SimulatedCrash instead of dying "
                "(except BaseException or a bare except); in-process the code after the catch "
                "still ran. Let SimulatedCrash propagate, or use mode='process'."
            )
        if life.crash_step is None:
            break
    report.scenarios.append(sid)
    report.findings.extend(judge.scenario(sid, lives, log))
    _log.debug("scenario=%s lives=%d effects=%d", sid, len(lives), len(log.performed))
    if len(lives) < len(plan):
        if lives[-1].error is None:
            report.notes.append(
                f"{sid}: the crash point was never reached (that life made only "
                f"{lives[-1].calls} effect call{'' if lives[-1].calls == 1 else 's'})"
            )
        return None
    return lives


def _explore(
    runner: Runner,
    factory: Callable[[Context], Any],
    items: list[Any],
    prefix: tuple[Point, ...],
    calls: int,
    crashes: int,
    judge: Judge,
    report: Report,
    progress: Progress,
) -> None:
    """Every scenario that starts with ``prefix`` and dies at one more point, recursively."""
    for point in points_for(calls):
        points = (*prefix, point)
        lives = _run(runner, factory, items, points, judge, report)
        progress.update(len(report.scenarios), len(report.findings))
        if lives is not None and len(points) < crashes:
            _explore(
                runner, factory, items, points, lives[-1].calls, crashes, judge, report, progress
            )
