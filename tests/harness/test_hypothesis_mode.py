"""explore="hypothesis": drawn crash schedules, shrunk to an only= rerun of the exhaustive mode."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest

from crashresume import Context, UsageError, conform
from crashresume._scenarios import parse_scenario_id
from crashresume._selftest import CASES, INPUTS, Case, FileStore

from .subjects import JOBS, factory

hypothesis = pytest.importorskip("hypothesis", reason="explore='hypothesis' needs Hypothesis")

from hypothesis.database import InMemoryExampleDatabase  # noqa: E402

_folders = itertools.count()


def selftest_factory(case: Case, tmp_path: Path) -> Any:
    folder = tmp_path / f"{case.subject.__name__}-{next(_folders)}"
    folder.mkdir()

    def make_agent(ctx: Context) -> Any:
        return case.subject(ctx, FileStore(folder / f"{ctx.run_id}.json"))

    return make_agent


# Crash schedules only: Hypothesis draws crash schedules, never overlapping lives, and a case
# that needs conform options (faults=, scenarios=) is found by them alone.
BROKEN = [
    case
    for case in CASES
    if case.expected and not case.options and case.name != "random id in the arguments"
]


@pytest.mark.parametrize("case", BROKEN, ids=[case.subject.__name__ for case in BROKEN])
def test_each_broken_selftest_subject_is_found_and_shrunk_to_at_most_two_crashes(
    case: Case, tmp_path: Path
) -> None:
    report = conform(
        selftest_factory(case, tmp_path),
        inputs=list(INPUTS),
        explore="hypothesis",
        max_examples=60,
        seed=1,
        database=None,
    )

    assert not report.passed
    assert report.explore == "hypothesis"
    scenario = report.findings[0].scenario
    assert {finding.scenario for finding in report.findings} == {scenario}
    assert 1 <= len(parse_scenario_id(scenario)) <= 2
    assert {(scenario, str(f.kind)) for f in report.findings} <= case.expected | {
        (scenario, kind) for _, kind in case.expected
    }
    assert report.findings[0].rerun.endswith(f"only={scenario!r})")
    assert (
        f"the failing one shrunk to {scenario} (rerun it with only={scenario!r})"
        in (report.notes[-1])
    )
    # The rerun line means the same in the exhaustive mode: the same findings come back.
    again = conform(selftest_factory(case, tmp_path), inputs=list(INPUTS), only=scenario)
    assert again.findings == report.findings


def test_a_conforming_subject_passes_and_the_seed_is_reported(tmp_path: Path) -> None:
    report = conform(
        selftest_factory(CASES[0], tmp_path),
        inputs=list(INPUTS),
        explore="hypothesis",
        max_examples=25,
        seed=1234,
        database=None,
    )

    assert report.passed, str(report)
    assert report.seed == 1234
    assert report.examples == 25
    assert "seed=1234" in str(report).splitlines()[0]
    assert report.notes == [
        "hypothesis: 25 schedules, none failed; seed=1234; rerun this search with "
        "conform(..., explore='hypothesis', seed=1234)"
    ]
    assert any("-then-" in scenario for scenario in report.scenarios)  # crashes in recovery


def test_the_same_seed_draws_the_same_schedules() -> None:
    def run() -> list[str]:
        report = conform(
            factory(), JOBS, explore="hypothesis", max_examples=15, seed=9, database=None
        )
        return report.scenarios

    assert run() == run()


def test_a_failing_schedule_is_kept_in_the_example_database_and_tried_first() -> None:
    from .subjects import UnkeyedAgent

    database = InMemoryExampleDatabase()
    first = conform(
        factory(UnkeyedAgent),
        JOBS,
        explore="hypothesis",
        max_examples=50,
        seed=5,
        database=database,
    )
    again = conform(
        factory(UnkeyedAgent), JOBS, explore="hypothesis", max_examples=1, seed=6, database=database
    )

    assert first.findings and again.findings
    assert database.data  # the shrunk failing schedule was saved
    failing = first.findings[0].scenario
    assert again.findings[0].scenario == failing
    assert again.scenarios[0] == failing  # the saved schedule ran first, before any new draw


def test_hypothesis_mode_runs_lives_in_process_mode_too(tmp_path: Path) -> None:
    fresh_key = next(case for case in CASES if case.name == "fresh key per attempt")
    report = conform(
        selftest_factory(fresh_key, tmp_path),
        inputs=list(INPUTS),
        mode="process",
        explore="hypothesis",
        max_examples=20,
        seed=2,
        database=None,
    )

    assert {str(kind) for kind in report.kinds()} == {"duplicate_effect"}
    assert report.mode == "process"


@pytest.mark.parametrize(
    ("options", "advice"),
    [
        ({"only": "run-1"}, "only= reruns one scenario of the exhaustive plan"),
        ({"max_examples": 0}, "max_examples=0: draw at least one schedule"),
        ({"explore": "random"}, "explore='random': use one of 'exhaustive', 'hypothesis'"),
    ],
)
def test_hypothesis_options_that_make_no_sense_are_usage_errors(
    options: dict[str, Any], advice: str
) -> None:
    options.setdefault("explore", "hypothesis")
    with pytest.raises(UsageError, match=advice):
        conform(factory(), inputs=JOBS, **options)
