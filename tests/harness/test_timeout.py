"""conform(..., timeout=S): a start that hangs is stopped and reported, in both modes."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from crashresume import Context, FindingKind, UsageError, conform

from .subjects import JOBS, FileAgent, MemoryStore, SeedAgent, at, expect, factory

HANG = 0.5  # seconds: the timeout these tests give a start that never returns


@pytest.fixture
def release() -> Iterator[threading.Event]:
    """Hung in-process starts wait on this; set at the end so their threads can end."""
    event = threading.Event()
    yield event
    event.set()


def test_an_in_process_resume_that_hangs_is_a_timeout_finding_and_conform_goes_on(
    release: threading.Event,
) -> None:
    late: list[str] = []
    closed: list[str] = []

    class HangsOnResume(SeedAgent):
        def __init__(self, ctx: Context, store: MemoryStore) -> None:
            super().__init__(ctx, store)
            self.resumed = bool(self.done)

        def step(self, job: str) -> None:
            if self.resumed and job == "job-3":
                release.wait()
                try:  # the harness gave up on this start: its effects die, unrecorded
                    self.ctx.effect("late", job)
                except BaseException:
                    late.append(job)
                return
            super().step(job)

        def close(self) -> None:
            closed.append(self.ctx.run_id)

    started = time.monotonic()
    report = conform(factory(HangsOnResume), inputs=JOBS, timeout=HANG)
    elapsed = time.monotonic() - started

    hung = {"run-before-2", "run-2", "run-before-3", "run-3"}  # resumes that found job-1 done
    assert at(report.findings) == expect("timeout", hung)
    assert elapsed < 10 * HANG  # four hangs of HANG each, not forever
    by_scenario = {finding.scenario: finding for finding in report.findings}
    assert by_scenario["run-3"].message == (
        "resume 1 did not finish within 0.5 s and was abandoned (its thread cannot be "
        "killed), while stepping input 3 of 3 ('job-3')"
    )
    assert by_scenario["run-3"].rerun == (
        "conform(make_agent, inputs=['job-1', 'job-2', 'job-3'], only='run-3')"
    )
    assert closed.count("run-3") == 2  # the abandoned start was torn down by the watchdog
    release.set()
    deadline = time.monotonic() + 5
    while len(late) < 4 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert sorted(late) == ["job-3"] * 4


def test_a_hung_child_is_killed_and_reported_with_its_rerun_line(tmp_path: Path) -> None:
    class HangsInChild(FileAgent):
        def __init__(self, ctx: Context, path: Path) -> None:
            super().__init__(ctx, path)
            self.resumed = bool(self.done)

        def step(self, job: str) -> None:
            if self.resumed and job == "job-2" and job not in self.done:
                (tmp_path / f"{self.ctx.run_id}.pid").write_text(str(os.getpid()))
                time.sleep(3600)  # real time: a hang the harness must time out
            super().step(job)

    (tmp_path / "state").mkdir()
    report = conform(
        lambda ctx: HangsInChild(ctx, tmp_path / "state" / f"{ctx.run_id}.log"),
        inputs=JOBS,
        mode="process",
        timeout=HANG,
    )

    assert at(report.findings) == expect("timeout", {"run-before-2", "run-2"})
    finding = report.findings[0]
    assert finding.kind is FindingKind.TIMEOUT
    assert finding.message == (
        "resume 1 did not finish within 0.5 s and was killed (SIGKILL), while stepping "
        "input 2 of 3 ('job-2')"
    )
    assert finding.rerun.endswith("only='run-before-2', mode='process')")
    for sid in ("run-before-2", "run-2"):
        pid = int((tmp_path / f"{sid}.pid").read_text())
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)  # killed and reaped


def test_a_baseline_that_hangs_is_a_timeout_at_run_and_no_scenario_runs(
    release: threading.Event,
) -> None:
    class Hangs(SeedAgent):
        def step(self, job: str) -> None:
            if job == "job-2":
                release.wait()
            super().step(job)

    report = conform(factory(Hangs), inputs=JOBS, timeout=HANG)

    assert at(report.findings) == {("run", "timeout")}
    assert report.scenarios == []
    assert report.findings[0].message.startswith(
        "the crash-free baseline 'run' did not finish within 0.5 s"
    )
    assert "crash scenarios were skipped: a baseline did not finish in time" in report.notes


def test_a_hang_in_make_agent_says_so(tmp_path: Path) -> None:
    def make_agent(ctx: Context) -> Any:
        if ctx.run_id == "run-1":
            marker = tmp_path / "started"
            if marker.exists():
                time.sleep(3600)  # real time: a hang the harness must time out
            marker.touch()
        return FileAgent(ctx, tmp_path / f"{ctx.run_id}.log")

    report = conform(make_agent, inputs=JOBS, mode="process", timeout=HANG, only="run-1")

    assert at(report.findings) == {("run-1", "timeout")}
    assert report.findings[0].message.endswith("while make_agent(ctx) ran")


@pytest.mark.parametrize("timeout", [0, -1, "5", True])
def test_a_timeout_that_is_not_a_positive_number_is_a_usage_error(timeout: Any) -> None:
    with pytest.raises(UsageError, match="give the seconds one start may take"):
        conform(factory(), inputs=JOBS, timeout=timeout)
