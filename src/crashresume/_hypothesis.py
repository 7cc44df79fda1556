"""``explore="hypothesis"``: crash schedules drawn by Hypothesis, shrunk to the shortest.

With ``faults=`` a schedule may instead be one fault scenario (``_faultplan``): a fault of
the kinds asked for at one effect call of the first start, and the restart if it ended it.

A schedule is the crash point of each life in turn: the first life always dies (right before
or right after one of its effect calls), every resumed life may die again or run to its end,
up to ``crashes`` crashes. The points are drawn while the scenario runs, so a resume's crash
can fall anywhere in that resume. A schedule with any finding fails the example; Hypothesis
then shrinks it (fewer crashes, earlier calls, "after" before "before") and the report gives
the shortest one as a scenario id that ``only=`` reruns in the exhaustive mode.

Every example gets a run id of its own (``example-<n>``) so durable state keyed by
``ctx.run_id`` never leaks from one example into the next, replays included.
"""

from __future__ import annotations

import itertools
import logging
import random
from collections.abc import Callable, Sequence
from typing import Any

from crashresume._context import Context, ScenarioLog
from crashresume._errors import CrashResumeError, UsageError
from crashresume._faultplan import FaultRun, judge_fault_run
from crashresume._faults import Fault
from crashresume._findings import Finding
from crashresume._judge import Judge
from crashresume._plan import Executor
from crashresume._report import Report
from crashresume._runner import Life, LifeSpec
from crashresume._scenarios import Point, scenario_id

# conform(database=...)'s default: "use the example database of Hypothesis's settings profile"
PROFILE_DATABASE: Any = object()

_log = logging.getLogger(__name__)
_examples = itertools.count(1)  # run ids of examples, unique in this process


class _Failed(Exception):
    """An example's schedule produced findings (Hypothesis shrinks on this)."""


def _hypothesis() -> Any:
    try:
        import hypothesis
    except ImportError as exc:
        raise UsageError(
            "explore='hypothesis' needs Hypothesis: pip install 'crashresume[hypothesis]'"
        ) from exc
    return hypothesis


def explore_hypothesis(
    executor: Executor,
    factory: Callable[[Context], Any],
    items: list[Any],
    judge: Judge,
    report: Report,
    crashes: int,
    max_examples: int,
    seed: int | None,
    database: Any,
    faults: Sequence[str] = (),
) -> tuple[int, int]:
    """Run the search, put the shortest failing schedule into ``report``; (seed, examples)."""
    hypothesis = _hypothesis()
    from hypothesis import strategies as st

    if seed is None:
        seed = random.SystemRandom().randrange(2**32)
    calls = max(report.baseline_effects, 1)
    tried: dict[str, None] = {}  # scenario ids run, in first-seen order
    failing: list[tuple[str, list[Finding], list[str]]] = []
    ran = 0

    def one_schedule(data: Any) -> None:
        nonlocal ran
        ran += 1
        run_id = f"example-{next(_examples)}"
        if faults and data.draw(st.booleans(), label="fault"):
            kind = data.draw(st.sampled_from(faults), label="kind")
            fault = Fault(kind=kind, call=data.draw(st.integers(1, calls), label="call"))
            run = FaultRun(0, fault, run_id)
            while (spec := run.next_spec()) is not None:
                run.add(executor.life(factory, items, spec))
            judged(run.sid, judge_fault_run(judge, run), run.notes())
            return
        log = ScenarioLog()
        points: list[Point] = []
        lives: list[Life] = []
        while True:
            point = None
            if not points or (len(points) < crashes and data.draw(st.booleans(), label="again")):
                point = Point(
                    call=data.draw(st.integers(1, calls), label="call"),
                    before=data.draw(st.booleans(), label="before"),
                )
            spec = LifeSpec(
                run_id=run_id, log=log, crash=point, restart=bool(lives), baseline=False
            )
            life = executor.life(factory, items, spec)
            lives.append(life)
            if point is None or life.crash_step is None:
                break  # ran to its end, raised, hung, or never reached its crash point
            points.append(point)
        sid = scenario_id(points)
        notes = [note.replace(run_id, sid) for life in lives for note in life.notes]
        judged(sid, judge.scenario(sid, lives, log), notes)

    def judged(sid: str, findings: list[Finding], notes: list[str]) -> None:
        tried.setdefault(sid)
        if findings:
            failing.append((sid, findings, notes))
            raise _Failed(f"{sid}: {', '.join(sorted({str(f.kind) for f in findings}))}")

    one_schedule._hypothesis_internal_add_digest = (  # type: ignore[attr-defined]
        f"crashresume {report.subject} {report.mode} {items!r}".encode()
    )
    profile = hypothesis.settings()
    test = hypothesis.settings(
        max_examples=max_examples,
        database=profile.database if database is PROFILE_DATABASE else database,
        deadline=None,
        derandomize=False,
        report_multiple_bugs=False,
        print_blob=False,
        verbosity=hypothesis.Verbosity.quiet,
        suppress_health_check=list(hypothesis.HealthCheck),
    )(hypothesis.given(st.data())(one_schedule))
    # What @hypothesis.seed(n) sets, without its other effect: it would also switch the
    # example database off, and a failing schedule must be replayed first next time.
    test._hypothesis_internal_use_seed = seed
    _log.info("hypothesis subject=%s seed=%d max_examples=%d", report.subject, seed, max_examples)
    try:
        test()
    except _Failed:
        pass
    except CrashResumeError:
        raise
    except hypothesis.errors.HypothesisException as exc:
        report.notes.append(f"hypothesis stopped: {type(exc).__name__}: {exc}")
    report.scenarios.extend(tried)
    where = f"seed={seed}; rerun this search with conform(..., explore='hypothesis', seed={seed})"
    if failing:
        sid, findings, notes = failing[-1]  # Hypothesis replays the shrunk example last
        report.findings.extend(findings)
        report.notes.extend(notes)
        report.notes.append(
            f"hypothesis: {ran} schedules, the failing one shrunk to {sid} "
            f"(rerun it with only={sid!r}); {where}"
        )
    else:
        report.notes.append(f"hypothesis: {ran} schedules, none failed; {where}")
    return seed, ran
