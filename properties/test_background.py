"""The ci exploration in its own process: its result comes back whole, its failure says
why, and a stop closes the database it started."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from .background import Background, BackgroundFinding, from_json, to_json
from .driving import Stats
from .events import Event, Schedule
from .exploring import Exploration
from .violations import Violation


def _serving(datadir: str) -> list[int]:
    """Postmasters serving ``datadir``."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            argv = (proc / "cmdline").read_bytes().decode(errors="replace").split("\0")
        except OSError:
            continue
        if proc.name.isdigit() and Path(argv[0]).name == "postgres" and datadir in argv:
            found.append(int(proc.name))
    return found


def test_an_exploration_and_its_finding_come_back_as_they_were(tmp_path: Path) -> None:
    schedule = Schedule(events=(Event(op="start", run=0), Event(op="cancel", run=0)), name="x")
    path = schedule.save(tmp_path / "x.json")
    stats = Stats(examples=3, events=9, fired={"after_call": 2}, events_by_op={"start": 3})
    found = Violation("failed", "r0", 1, "it is not failed")
    result = Exploration(
        profile="ci", seed=None, elapsed=1.5, stats=stats, error=found, saved=[(path, schedule)]
    )

    back = from_json(to_json(result))

    assert back.stats == stats and back.saved == [(path, schedule)]
    assert isinstance(back.error, BackgroundFinding) and back.error.kind == "Violation"
    assert str(back.error) == "[failed] run r0 step 1: it is not failed"
    assert (back.profile, back.seed, back.elapsed) == ("ci", None, 1.5)


def test_an_exploration_that_cannot_run_says_why() -> None:
    background = Background(profile="fast", name="bad")
    try:
        with pytest.raises(RuntimeError, match=r"exited 2:(.|\n)*invalid choice: 'fast'"):
            background.result()
    finally:
        background.stop()
    assert not background.directory.exists()


def test_a_stopped_exploration_closes_its_database() -> None:
    background = Background(profile="ci", name="stopped")
    try:
        deadline = time.monotonic() + 60
        while "database " not in background.log.read_text() and background.process.poll() is None:
            assert time.monotonic() < deadline, "its database never started"
            time.sleep(0.05)
        said = background.log.read_text()
        datadir = said.split("database ", 1)[1].split()[0]
        serving = _serving(datadir)
    finally:
        background.stop()
    assert serving, said
    assert background.process.returncode == 128 + 15  # its own exit, past its finally blocks
    assert not _serving(datadir) and not Path(datadir).exists()
