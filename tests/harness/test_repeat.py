"""repeat=N: every scenario N times, each finding with how many of the N showed it.

The race is driven by a seeded coin per run id, never by timing: in each repetition the
subject's progress mark either lands before its charge (the background writer won) or
after it, so a crash right before the charge loses it in a known number of repetitions.
"""

from __future__ import annotations

import os
import random
from pathlib import Path
from typing import Any

import pytest

from crashresume import Context, UsageError, conform
from crashresume._selftest import INPUTS, Conforming, FileStore

from .subjects import at, expect, factory

N = 20


def _writer_first(run_id: str) -> bool:
    """The coin: did the progress write win the race against the charge in this run?"""
    return random.Random(run_id).random() < 0.3


class RacingCheckpoint(Conforming):
    """Bug: the progress mark and the charge race (no order enforced between them)."""

    def step(self, job: str) -> None:
        if job in self.data["done"]:
            return
        if _writer_first(self.ctx.run_id):
            self.data["done"].append(job)
            self.store.save(self.data)
            self.charge(job)
        else:
            self.charge(job)
            self.data["done"].append(job)
            self.store.save(self.data)


def _files(folder: Path) -> Any:
    def make_agent(ctx: Context) -> Any:
        return RacingCheckpoint(ctx, FileStore(folder / f"{ctx.run_id}.json"))

    return make_agent


def _lost_in(scenario: str) -> int:
    """In how many of the N repetitions of ``scenario`` the writer won, losing the charge."""
    return sum(_writer_first(f"{scenario}-r{rep}") for rep in range(1, N + 1))


def test_a_race_is_reported_with_how_many_repetitions_showed_it(tmp_path: Path) -> None:
    report = conform(_files(tmp_path), list(INPUTS), repeat=N)

    before = [f"run-before-{k}" for k in (1, 2, 3)]
    counts = {scenario: _lost_in(scenario) for scenario in before}
    assert all(0 < count < N for count in counts.values()), counts  # it is a race
    assert at(report.findings) == expect("effect_lost", set(before))
    assert {f.scenario: f.repeats for f in report.findings} == {
        scenario: f"{count}/{N}" for scenario, count in counts.items()
    }
    assert report.scenarios == [f"run-{edge}{k}" for k in (1, 2, 3) for edge in ("before-", "")]
    assert report.repeat == N
    [first] = [f for f in report.findings if f.scenario == "run-before-1"]
    assert first.message == "charge('job-1') never happened, once in the baseline"
    assert first.rerun.endswith(f"only='run-before-1', repeat={N})")
    shown = f"{counts['run-before-1']}/{N}"
    assert f"run-before-1 (the first run died right before effect call 1), in {shown} runs:" in (
        str(report)
    )
    assert report.to_dict()["findings"][0]["repeats"] == f"{counts['run-before-1']}/{N}"


def test_without_repeat_the_same_race_shows_or_hides_by_chance(tmp_path: Path) -> None:
    report = conform(_files(tmp_path), list(INPUTS))

    showing = {f"run-before-{k}" for k in (1, 2, 3) if _writer_first(f"run-before-{k}")}
    assert at(report.findings) == expect("effect_lost", showing)
    assert all(finding.repeats is None for finding in report.findings)
    assert showing != {"run-before-1", "run-before-2", "run-before-3"}  # one run misses some


@pytest.mark.skipif(not hasattr(os, "fork"), reason="process mode needs os.fork")
def test_repetitions_run_side_by_side_with_workers_and_give_the_serial_report(
    tmp_path: Path,
) -> None:
    reports = {}
    for workers in (1, 3):
        folder = tmp_path / f"workers-{workers}"
        folder.mkdir()
        reports[workers] = conform(
            _files(folder), list(INPUTS), mode="process", workers=workers, repeat=4
        )

    assert reports[3].to_dict() == reports[1].to_dict()
    assert {f.scenario: f.repeats for f in reports[1].findings} == {
        f"run-before-{k}": f"{count}/4"
        for k in (1, 2, 3)
        if (count := sum(_writer_first(f"run-before-{k}-r{rep}") for rep in range(1, 5)))
    }
    # Every repetition kept its durable state apart: one file per repetition's run id.
    assert len(list((tmp_path / "workers-3").glob("run-*-r*.json"))) == 6 * 4


def test_repeat_with_crashes_2_counts_each_follow_up_over_the_repetitions_that_ran_it(
    tmp_path: Path,
) -> None:
    report = conform(_files(tmp_path), list(INPUTS), repeat=3, crashes=2)

    assert report.scenarios[:3] == [
        "run-before-1",
        "run-before-1-then-before-1",
        "run-before-1-then-1",
    ]
    for finding in report.findings:
        shown, runs = (int(part) for part in (finding.repeats or "").split("/"))
        assert 0 < shown <= runs <= 3


def test_repeat_applies_to_overlap_scenarios_too(tmp_path: Path) -> None:
    def make_agent(ctx: Context) -> Any:
        return Conforming(ctx, FileStore(tmp_path / f"{ctx.run_id}.json"))

    report = conform(make_agent, list(INPUTS), scenarios="overlap", repeat=2)

    assert {(f.scenario, f.repeats) for f in report.findings} == {
        (scenario, "2/2")
        for scenario in (
            "run-overlap-before-1",
            "run-overlap-1",
            "run-overlap-before-2",
            "run-overlap-2",
        )
    }
    assert (tmp_path / "run-overlap-2-r2.json").exists()


@pytest.mark.parametrize(
    ("options", "advice"),
    [
        ({"repeat": 0}, r"repeat=0: run each scenario 1 \(default\) or more times"),
        ({"repeat": True}, "repeat=True: run each scenario"),
        ({"repeat": "20"}, "repeat='20': run each scenario"),
        ({"repeat": 2, "explore": "hypothesis"}, "drop explore='hypothesis'"),
    ],
)
def test_a_bad_repeat_is_a_usage_error_that_says_what_to_write(
    options: dict[str, Any], advice: str
) -> None:
    with pytest.raises(UsageError, match=advice):
        conform(factory(), list(INPUTS), **options)
