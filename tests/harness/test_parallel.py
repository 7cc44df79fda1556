"""conform(..., mode="process", workers=N): scenarios side by side, the serial run's report."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest

from crashresume import Context, UsageError, conform

from .subjects import SqliteAgent, UnkeyedSqliteAgent, factory, per_scenario

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="process mode needs os.fork")

INPUTS = ["a", "b", "c"]


@pytest.mark.parametrize("agent", [SqliteAgent, UnkeyedSqliteAgent])
def test_workers_give_the_serial_report_in_the_serial_order_with_crashes_2(
    agent: type[SqliteAgent], tmp_path: Path
) -> None:
    reports = {}
    for workers in (1, 3):
        folder = tmp_path / f"workers-{workers}"
        folder.mkdir()
        make_agent = per_scenario(folder, agent, ".db")
        reports[workers] = conform(
            make_agent, inputs=INPUTS, mode="process", crashes=2, workers=workers
        )

    serial, parallel = reports[1], reports[3]
    assert parallel.to_dict() == serial.to_dict()
    assert str(parallel) == str(serial)
    # 6 first crash points, each with the points of its own resume below it.
    assert len(serial.scenarios) > 6
    assert serial.scenarios[:2] == ["run-before-1", "run-before-1-then-before-1"]
    if agent is SqliteAgent:
        assert serial.passed, str(serial)
    else:
        assert {str(kind) for kind in serial.kinds()} == {"duplicate_effect", "resume_diverged"}


class Sleepy(SqliteAgent):
    """Each step takes a while; every start writes when it began and when it last acted."""

    def __init__(self, ctx: Context, path: Path) -> None:
        super().__init__(ctx, path)
        self.trace = path.with_suffix(f".{os.getpid()}.trace")
        self.trace.write_text(f"{time.time()}\n")

    def step(self, job: str) -> None:
        time.sleep(0.05)
        super().step(job)
        with self.trace.open("a") as trace:
            trace.write(f"{time.time()}\n")


def test_with_workers_the_starts_of_different_scenarios_overlap_in_time(tmp_path: Path) -> None:
    make_agent = per_scenario(tmp_path, Sleepy, ".db")
    report = conform(make_agent, inputs=INPUTS, mode="process", workers=4)

    assert report.passed, str(report)
    spans = []
    for trace in tmp_path.glob("*.trace"):
        times = [float(line) for line in trace.read_text().split()]
        spans.append((trace.name.split(".")[0], times[0], times[-1]))
    overlapping = {
        (one[0], two[0])
        for one in spans
        for two in spans
        if one[0] != two[0] and one[1] < two[2] and two[1] < one[2]
    }
    assert overlapping, "no two scenarios ever ran at the same time"


def test_a_harness_error_in_one_child_stops_every_other_child(tmp_path: Path) -> None:
    def make_agent(ctx: Context) -> Any:
        agent = Sleepy(ctx, tmp_path / f"{ctx.run_id}.db")
        if ctx.run_id == "run-2" and agent.state():
            return object()  # a misuse only this resume makes
        return agent

    before = _children()  # a session database started by an earlier test is one
    with pytest.raises(UsageError, match="has no step"):
        conform(make_agent, inputs=INPUTS, mode="process", workers=4)

    assert _children() <= before  # no child left behind, not even a zombie


def _children() -> set[int]:
    """The pids of this process's children, zombies included (from /proc)."""
    found = set()
    for entry in Path("/proc").iterdir():
        try:
            stat = (entry / "stat").read_text() if entry.name.isdigit() else ""
        except OSError:  # it ended meanwhile
            continue
        if stat and int(stat.rsplit(")", 1)[1].split()[1]) == os.getpid():
            found.add(int(entry.name))
    return found


@pytest.mark.parametrize(
    ("options", "advice"),
    [
        ({"workers": 2}, "workers=2 needs mode='process'"),
        ({"workers": 0, "mode": "process"}, "workers=0: use 1"),
        ({"workers": "2", "mode": "process"}, "workers='2': use 1"),
    ],
)
def test_workers_outside_process_mode_or_below_one_is_a_usage_error(
    options: dict[str, Any], advice: str
) -> None:
    with pytest.raises(UsageError, match=advice):
        conform(factory(), inputs=INPUTS, **options)
