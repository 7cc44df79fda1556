"""The nightly driver logs its seeds, saves what it finds, and says how to replay it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from .server import DATADIR_ENV, SuiteDatabase

ROOT = Path(__file__).resolve().parent.parent
TIMEOUT = 240  # seconds


def _nightly(
    database: SuiteDatabase, tmp_path: Path, *args: str
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable, "-m", "properties.nightly", "--seed", "4242",
            "--failures", str(tmp_path / "failures"), "--report", str(tmp_path / "report.json"),
            *args,
        ],
        cwd=ROOT,
        env={**os.environ, DATADIR_ENV: str(database.cluster.datadir)},
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )  # fmt: skip


def test_a_nightly_round_logs_its_seed_and_reports_nothing_found(
    suite_database: SuiteDatabase, tmp_path: Path
) -> None:
    result = _nightly(  # the grid: test_schedules runs it, and the next test here
        suite_database, tmp_path, "--schedules", "12", "--round-examples", "3", "--no-small-scope"
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "round 1 shard 1/1 seed 4242" in result.stdout
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["rounds"][0]["seed"] == 4242
    assert [r["small_scope"] for r in report["rounds"]] == [0] * len(report["rounds"])
    examples = [r["examples"] for r in report["rounds"]]
    # rounds of at most 3 asked for (Hypothesis adds the draws it discards), then more; the
    # last round asks only for what is left of the 12, which may be one
    assert len(examples) >= 2 and min(examples[:-1]) >= 2
    assert report["totals"]["examples"] == sum(examples) >= 12
    assert report["findings"] == []
    totals = report["totals"]
    assert (
        f"{totals['examples']} schedules, {totals['events']} events, {totals['crashes']} "
        f"crashes, {totals['db_crashes']} database crashes, {totals['zombies']} zombies, "
        f"{totals['operator_actions']} operator actions"
    ) in result.stdout
    assert totals["operator_actions"] == sum(report["operators"].values())
    assert (
        f"{totals['orphaned_sweeps']} orphaned sweeps, {totals['protocol_switches']} protocol "
        "switches"
    ) in result.stdout
    faults = [r["faults"] for r in report["rounds"]]
    assert totals["orphaned_sweeps"] == sum(f.get("orphan sweep", 0) for f in faults)
    assert all(k.startswith("operator ") for k in report["operators"])


def test_a_nightly_finding_is_saved_with_its_replay_command(
    suite_database: SuiteDatabase, tmp_path: Path
) -> None:
    # A budget of one schedule: the first round's grid runs whole whatever the budget (the
    # small scope comes first), and it is the grid that finds a runtime without fencing.
    result = _nightly(suite_database, tmp_path, "--schedules", "1", "--variant", "no_fencing")
    assert result.returncode == 1, result.stdout + result.stderr
    report = json.loads((tmp_path / "report.json").read_text())
    finding = report["findings"][0]
    assert finding["seed"] == 4242
    assert report["rounds"][0]["small_scope"] > 0  # the grid ran first, and found it
    assert "[" in finding["failure"]  # a violation, named by its kind
    assert Path(finding["file"]).exists()
    assert f"replay: python -m properties.replay {finding['file']} --mode process" in result.stdout


def test_a_nightly_pool_round_runs_the_real_supervisor_and_counts_its_events(
    suite_database: SuiteDatabase, tmp_path: Path
) -> None:
    result = _nightly(
        suite_database, tmp_path, "--mode", "pool", "--schedules", "2", "--round-examples", "1"
    )
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["mode"] == "pool" and report["findings"] == []
    assert report["rounds"][0]["seed"] == 4242 and report["totals"]["examples"] == 2
    assert set(report["pool"]) >= {"pool worker killed", "supervisor hang-up", "event rival_sweep"}
    assert "pool: " in result.stdout and "rival sweep" in result.stdout
