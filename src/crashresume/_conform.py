"""``conform``: run the baselines, plan the crash scenarios, run and judge each one."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from crashresume._arguments import check_arguments, check_only, positive_int
from crashresume._context import Context
from crashresume._errors import BaselineError, UsageError
from crashresume._faultplan import check_faults, fault_runs, run_faults, wanted_fault
from crashresume._faults import parse_fault_id
from crashresume._findings import FindingKind
from crashresume._hypothesis import PROFILE_DATABASE, explore_hypothesis
from crashresume._judge import Judge, hang_message, make_finding
from crashresume._overlap import DEFAULT_KINDS, explore_overlaps, scenario_kinds
from crashresume._plan import Executor, ScenarioRun
from crashresume._progress import Progress
from crashresume._repeat import explore_repeated
from crashresume._report import Report, Rerun
from crashresume._rules import Rule, check_rules, make_judge
from crashresume._scenarios import (
    BASELINE_ID,
    REPEAT_ID,
    Point,
    overlap_id,
    parse_overlap_id,
    parse_scenario_id,
    points_for,
)
from crashresume._watchdog import DEFAULT_TIMEOUT, InProcessRunner, quiet_thread_deaths
from crashresume._watched import WatchedExecutor

_log = logging.getLogger(__name__)

MODES = ("inprocess", "process")  # "inprocess": raise SimulatedCrash; "process": fork + os._exit
EXPLORERS = ("exhaustive", "hypothesis")  # every point of the plan, or drawn schedules
DEFAULT_CRASHES = 1  # crashes per scenario of the exhaustive plan
DEFAULT_HYPOTHESIS_CRASHES = 5  # most crashes a drawn schedule has
DEFAULT_MAX_EXAMPLES = 100  # schedules the Hypothesis mode draws


def _executor(mode: str, workers: int, timeout: float | None) -> Executor:
    if mode == "inprocess":
        if workers != 1:
            raise UsageError(
                f"workers={workers} needs mode='process': in-process starts share one "
                "interpreter and its global state, so they run one at a time"
            )
        return WatchedExecutor(InProcessRunner(timeout))
    if mode == "process":
        from crashresume._pool import ProcessPool

        return ProcessPool(workers, timeout)
    raise UsageError(f"mode={mode!r} is not a mode; use one of {', '.join(map(repr, MODES))}")


def conform(
    make_agent: Callable[[Context], Any],
    inputs: Iterable[Any],
    *,
    crashes: int | None = None,
    mode: str = "inprocess",
    only: str | None = None,
    timeout: float | None = DEFAULT_TIMEOUT,
    workers: int = 1,
    explore: str = "exhaustive",
    max_examples: int = DEFAULT_MAX_EXAMPLES,
    seed: int | None = None,
    database: Any = PROFILE_DATABASE,
    scenarios: Iterable[str] | str = DEFAULT_KINDS,
    repeat: int = 1,
    faults: Iterable[str] | None = None,
    expect: Any = None,
    at_most_once: Iterable[str] | None = None,
) -> Report:
    """Crash the subject at every side-effect boundary, restart it, and report what went wrong.

    ``make_agent(ctx)`` is called once per start and returns an object with ``step(input)``
    (and optionally ``state()`` and ``close()``; or a context manager whose ``__enter__``
    gives that object). The baseline feeds every input to one start, twice; each crash
    scenario dies at one boundary (right before or right after an effect call), starts the
    subject again and feeds every input again from the first. ``crashes=2`` also dies once
    during each recovery. ``only="run-3"`` runs just that scenario (plus the baselines).

    ``timeout`` bounds every start (seconds, or None); a start that runs out of time is
    stopped and reported as ``timeout``. ``workers=N`` runs N scenarios side by side
    (``mode="process"``). ``explore="hypothesis"`` draws ``max_examples`` crash schedules
    of up to ``crashes`` (default 5) crashes each and shrinks a failing one.

    ``scenarios=["crash", "overlap"]`` also freezes the first start at every boundary
    instead of killing it, runs its restart, then wakes it (``run-overlap-<k>``): a start
    that acts or writes after it lost the run is reported as ``overlap``. ``repeat=N`` runs
    every scenario N times, for races; each finding says how many of the N showed it.

    ``faults=["lost", "fail", "slow", "rate_limited", "malformed"]`` (any of them) also runs,
    for every effect call k, a scenario ``run-<fault>-<k>`` where that call meets the fault and
    the subject's own retry path runs (see ``_faults``). ``expect={"send_invoice": 3}`` (or a
    callable over the effect log) and ``at_most_once=["charge"]`` are absolute rules, checked
    in the baseline too: a bug in every run is reported, which a baseline comparison cannot.
    """
    with quiet_thread_deaths():
        return _conform(
            make_agent,
            inputs,
            crashes=crashes,
            mode=mode,
            only=only,
            timeout=timeout,
            workers=workers,
            explore=explore,
            max_examples=max_examples,
            seed=seed,
            database=database,
            scenarios=scenarios,
            repeat=repeat,
            faults=faults,
            expect=expect,
            at_most_once=at_most_once,
        )


def _conform(
    make_agent: Callable[[Context], Any],
    inputs: Iterable[Any],
    *,
    crashes: int | None,
    mode: str,
    only: str | None,
    timeout: float | None,
    workers: int,
    explore: str,
    max_examples: int,
    seed: int | None,
    database: Any,
    scenarios: Iterable[str] | str,
    repeat: int,
    faults: Any,
    expect: Any,
    at_most_once: Any,
) -> Report:
    items = check_arguments(make_agent, inputs, crashes, timeout)
    fault_kinds = check_faults(faults)
    rules = check_rules(expect, at_most_once)
    positive_int("workers", workers, "use 1 (serial) or more scenarios at a time")
    kinds = scenario_kinds(scenarios)
    positive_int(
        "repeat", repeat, "run each scenario 1 (default) or more times, e.g. repeat=20 for a race"
    )
    if explore == "hypothesis" and (repeat != 1 or kinds != DEFAULT_KINDS):
        raise UsageError(
            "repeat= and scenarios= shape the exhaustive plan; Hypothesis draws crash "
            "schedules of its own: drop explore='hypothesis' to use them"
        )
    if explore not in EXPLORERS:
        raise UsageError(f"explore={explore!r}: use one of {', '.join(map(repr, EXPLORERS))}")
    if explore == "hypothesis" and only is not None:
        raise UsageError(
            "only= reruns one scenario of the exhaustive plan; drop explore='hypothesis' to "
            "rerun the schedule Hypothesis found"
        )
    frozen = parse_overlap_id(only)
    if frozen is not None:
        kinds, only, overlap_only = ("overlap",), "run", frozen  # the baselines, then it
    else:
        overlap_only = None
    fault_only = parse_fault_id(only) is not None
    wanted = None if only is None else () if fault_only else parse_scenario_id(only)
    executor = _executor(mode, workers, timeout)
    try:
        return _run_plan(
            executor,
            make_agent,
            items,
            crashes=crashes,
            wanted=wanted,
            only=only,
            explore=explore,
            max_examples=max_examples,
            seed=seed,
            database=database,
            lives=_Lives(kinds, repeat, timeout, overlap_only),
            faults=fault_kinds,
            rules=rules,
        )
    finally:
        executor.close()


def _run_plan(
    executor: Executor,
    make_agent: Callable[[Context], Any],
    items: list[Any],
    *,
    crashes: int | None,
    wanted: tuple[Point, ...] | None,
    only: str | None,
    explore: str,
    max_examples: int,
    seed: int | None,
    database: Any,
    lives: _Lives,
    faults: tuple[str, ...] = (),
    rules: tuple[Rule, ...] | None = None,
) -> Report:
    rerun = Rerun(make_agent, items, executor.mode, lives.repeat)
    base_run = ScenarioRun((), (), sid=BASELINE_ID)
    repeat_run = ScenarioRun((), (), sid=REPEAT_ID)
    executor.execute(make_agent, items, [base_run, repeat_run], lambda run: ())
    if crashes is None:
        crashes = DEFAULT_HYPOTHESIS_CRASHES if explore == "hypothesis" else DEFAULT_CRASHES
    base, repeat = base_run.lives[0], repeat_run.lives[0]
    report = Report(
        subject=rerun.name,
        inputs=len(items),
        mode=executor.mode,
        crashes=crashes if wanted is None else max(len(wanted), 1),
        baseline_effects=base.calls,
        explore=explore,
        repeat=lives.repeat,
    )
    if _baselines_hung(report, rerun, items, base_run, repeat_run):
        return report
    judge = make_judge(rules, base, base_run.log, rerun, items)
    report.findings.extend(judge.baselines(repeat, repeat_run.log))
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
    if explore == "hypothesis":
        positive_int("max_examples", max_examples, "draw at least one schedule")
        used, examples = explore_hypothesis(
            executor,
            make_agent,
            items,
            judge,
            report,
            crashes,
            max_examples,
            seed,
            database,
            faults,
        )
        return dataclasses.replace(report, seed=used, examples=examples)
    points: list[tuple[Point, ...]] = [(point,) for point in points_for(base.calls)]
    if wanted is not None:
        if wanted:
            check_only(only, wanted, base.calls)
        points, crashes = [wanted] if wanted else [], 0
    if "crash" in lives.kinds and points:
        if lives.repeat > 1:
            explore_repeated(
                executor, make_agent, items, points, crashes, judge, rerun, report, lives.repeat
            )
        else:
            roots = [ScenarioRun((i,), chain) for i, chain in enumerate(points)]
            _explore(executor, make_agent, items, roots, crashes, judge, report)
    if "overlap" in lives.kinds and (wanted is None or lives.only is not None):
        if lives.only is not None:
            check_only(overlap_id(lives.only), (lives.only,), base.calls)
        frozen = points_for(base.calls) if lives.only is None else [lives.only]
        explore_overlaps(
            executor,
            make_agent,
            items,
            frozen,
            judge,
            rerun,
            report,
            repeat=lives.repeat,
            timeout=lives.timeout,
            has_state=base.has_state,
        )
    if wanted is not None:
        fault = wanted_fault(only, base.calls)
        if fault is not None:
            runs = fault_runs([fault.kind], base.calls)[fault.call - 1 : fault.call]
            run_faults(executor, make_agent, items, runs, judge, report)
    elif faults:
        run_faults(executor, make_agent, items, fault_runs(faults, base.calls), judge, report)
    return report


@dataclasses.dataclass(frozen=True, slots=True)
class _Lives:
    """How lives are arranged: which scenario kinds, how often each, the overlap to rerun."""

    kinds: tuple[str, ...]
    repeat: int
    timeout: float | None
    only: Point | None  # only= named this overlap scenario


def _baselines_hung(
    report: Report,
    rerun: Rerun,
    items: list[Any],
    *runs: ScenarioRun,
) -> bool:
    """Report baselines that ran out of time; raise for one that raised."""
    hung = False
    for run in runs:
        life = run.lives[0]
        report.notes.extend(life.notes)
        if life.timed_out is not None:
            hung = True
            who = f"the crash-free baseline {run.sid!r}"
            message = hang_message(who, life, items)
            report.findings.append(make_finding(rerun, FindingKind.TIMEOUT, BASELINE_ID, message))
        elif not life.completed:
            raise BaselineError(
                f"the crash-free baseline {run.sid!r} did not finish: {life.error}. conform "
                "needs a subject that gets through all its inputs without a crash first; fix "
                "that, then test its resume."
            )
    if hung:
        report.notes.append("crash scenarios were skipped: a baseline did not finish in time")
    return hung


def _explore(
    executor: Executor,
    factory: Callable[[Context], Any],
    items: list[Any],
    roots: Sequence[ScenarioRun],
    crashes: int,
    judge: Judge,
    report: Report,
) -> None:
    """Run ``roots`` and, below ``crashes`` deep, one more crash at every point of each resume.

    Scenarios finish in any order (with workers); the report lists them in plan order.
    """
    finished: list[tuple[ScenarioRun, list[Any]]] = []
    found = 0
    progress = Progress(f"conform {report.subject}")

    def done(run: ScenarioRun) -> list[ScenarioRun]:
        nonlocal found
        findings = judge.scenario(run.sid, run.lives, run.log)
        finished.append((run, findings))
        found += len(findings)
        progress.update(len(finished), found)
        _log.debug(
            "scenario=%s lives=%d effects=%d", run.sid, len(run.lives), len(run.log.performed)
        )
        if not run.complete or len(run.points) >= crashes:
            return []
        return [
            ScenarioRun((*run.order, i), (*run.points, point))
            for i, point in enumerate(points_for(run.lives[-1].calls))
        ]

    try:
        executor.execute(factory, items, roots, done)
    finally:
        progress.close()
    for run, findings in sorted(finished, key=lambda pair: pair[0].order):
        report.scenarios.append(run.sid)
        report.findings.extend(findings)
        report.notes.extend(run.notes())
