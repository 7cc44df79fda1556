"""mode="process": each life is a forked child that dies with os._exit at its crash point."""

from __future__ import annotations

import io
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from crashresume import Context, IsolationError, conform
from crashresume._selftest import CASES, run_selftest

from .subjects import (
    AFTER,
    JOBS,
    BufferedFileAgent,
    FileAgent,
    SqliteAgent,
    UnkeyedSqliteAgent,
    at,
    expect,
    per_scenario,
)

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="process mode needs os.fork")


def test_a_sqlite_agent_that_commits_after_a_keyed_charge_passes_as_a_real_process(
    tmp_path: Path,
) -> None:
    report = conform(per_scenario(tmp_path, SqliteAgent, ".db"), inputs=JOBS, mode="process")

    assert report.passed, str(report)
    assert report.mode == "process"
    assert len(report.scenarios) == 6
    assert (tmp_path / "run-2.db").exists()  # the children wrote where the parent can see


def test_a_sqlite_agent_without_keys_is_reported_for_every_charge_it_repeats(
    tmp_path: Path,
) -> None:
    report = conform(per_scenario(tmp_path, UnkeyedSqliteAgent, ".db"), inputs=JOBS, mode="process")

    # The dead child's charge reached the parent's log before it died: that is the duplicate,
    # and the second charge's receipt is what the resumed agent stored.
    assert at(report.findings) == expect("duplicate_effect", AFTER) | expect(
        "resume_diverged", AFTER
    )


def test_a_file_agent_that_fsyncs_its_progress_passes_as_a_real_process(tmp_path: Path) -> None:
    report = conform(per_scenario(tmp_path, FileAgent, ".log"), inputs=JOBS, mode="process")

    assert report.passed, str(report)


def test_a_keyed_replay_in_a_new_child_returns_the_receipt_a_dead_child_got(
    tmp_path: Path,
) -> None:
    report = conform(
        per_scenario(tmp_path, FileAgent, ".log"), inputs=JOBS, mode="process", only="run-2"
    )

    assert report.passed, str(report)
    # The resume (a second child) logged the receipt the remote gave the first, dead child.
    lines = (tmp_path / "run-2.log").read_text().splitlines()
    assert lines == ["job-1 charge#1", "job-2 charge#2", "job-3 charge#3"]


def test_progress_buffered_until_the_agent_is_collected_is_lost_only_by_a_real_death(
    tmp_path: Path,
) -> None:
    lost = {"run-2", "run-3", "run-before-2", "run-before-3"}
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()

    in_process = conform(per_scenario(tmp_path / "a", BufferedFileAgent, ".log"), inputs=JOBS)
    as_process = conform(
        per_scenario(tmp_path / "b", BufferedFileAgent, ".log"), inputs=JOBS, mode="process"
    )

    # In-process the dead agent is garbage collected and its buffer written: the bug hides.
    assert in_process.passed, str(in_process)
    assert at(as_process.findings) == expect("state_lost", lost)


@pytest.mark.parametrize("mode", ["inprocess", "process"])
def test_both_modes_find_the_selftest_bugs_exactly_where_expected(mode: str) -> None:
    assert run_selftest(io.StringIO(), mode=mode, cases=CASES)


def test_a_resume_that_exits_the_process_itself_is_resume_crashed(tmp_path: Path) -> None:
    class Quits(FileAgent):
        def __init__(self, ctx: Context, path: Path) -> None:
            if path.exists():
                sys.exit(3)
            super().__init__(ctx, path)

    report = conform(per_scenario(tmp_path, Quits, ".log"), inputs=JOBS, mode="process")

    assert {kind for _, kind in at(report.findings)} == {"resume_crashed"}
    # A restart finds the progress file once job-1 was recorded, and quits.
    assert at(report.findings) == expect(
        "resume_crashed", {"run-before-2", "run-2", "run-before-3", "run-3"}
    )
    assert report.findings[0].message.startswith("resume 1 raised: SystemExit: 3")


def test_a_child_killed_by_a_signal_is_resume_crashed_with_the_signal(tmp_path: Path) -> None:
    class Killed(FileAgent):
        def __init__(self, ctx: Context, path: Path) -> None:
            if path.exists():
                os.kill(os.getpid(), 9)
            super().__init__(ctx, path)

    report = conform(
        per_scenario(tmp_path, Killed, ".log"), inputs=JOBS, mode="process", only="run-2"
    )

    assert at(report.findings) == {("run-2", "resume_crashed")}
    assert "was killed by signal 9 before it finished its inputs" in report.findings[0].message


def test_state_that_cannot_cross_the_process_boundary_is_an_isolation_error(
    tmp_path: Path,
) -> None:
    class Unpicklable(FileAgent):
        def state(self) -> Any:
            return lambda: None

    with pytest.raises(IsolationError, match=r"cannot be pickled .* or use mode='inprocess'"):
        conform(per_scenario(tmp_path, Unpicklable, ".log"), inputs=JOBS, mode="process")


def test_a_usage_error_inside_a_child_reaches_the_caller() -> None:
    from crashresume import UsageError

    with pytest.raises(UsageError, match="has no step"):
        conform(lambda ctx: object(), inputs=JOBS, mode="process")
