"""close() or the factory's context manager runs when a start ends, crashed or not."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest

from crashresume import Context, SimulatedCrash, conform

from .subjects import AFTER, BEFORE, JOBS, FileAgent, MemoryStore, SeedAgent, at, expect, factory


class Framework:
    """Process-global state, as DBOS keeps it: a second launch without a shutdown fails."""

    launched: str | None = None

    @classmethod
    def launch(cls, run_id: str) -> None:
        if cls.launched is not None:
            raise RuntimeError(f"already launched for {cls.launched}; call shutdown() first")
        cls.launched = run_id

    @classmethod
    def shutdown(cls) -> None:
        cls.launched = None


class OnFramework(SeedAgent):
    def __init__(self, ctx: Context, store: MemoryStore) -> None:
        Framework.launch(ctx.run_id)
        super().__init__(ctx, store)


class ClosesFramework(OnFramework):
    closed: ClassVar[list[str]] = []

    def close(self) -> None:
        self.closed.append(self.ctx.run_id)
        Framework.shutdown()


def test_a_framework_with_global_state_needs_teardown_and_close_gives_it_one() -> None:
    Framework.shutdown()
    ClosesFramework.closed = []

    assert conform(factory(ClosesFramework), inputs=JOBS).passed
    assert Framework.launched is None
    # Every start was closed: 2 baselines, and 2 starts for each of the 6 scenarios.
    assert len(ClosesFramework.closed) == 2 + 2 * 6

    with pytest.raises(Exception, match="already launched for run"):
        conform(factory(OnFramework), inputs=JOBS)
    Framework.shutdown()


def test_a_factory_that_returns_a_context_manager_is_entered_and_exited_per_start() -> None:
    exits: list[tuple[str, type[BaseException] | None]] = []
    stores: dict[str, MemoryStore] = {}

    @contextlib.contextmanager
    def make_agent(ctx: Context) -> Iterator[SeedAgent]:
        Framework.launch(ctx.run_id)
        try:
            yield SeedAgent(ctx, stores.setdefault(ctx.run_id, MemoryStore()))
        except BaseException as exc:
            exits.append((ctx.run_id, type(exc)))
            raise
        else:
            exits.append((ctx.run_id, None))
        finally:
            Framework.shutdown()

    report = conform(make_agent, inputs=JOBS)

    assert report.passed, str(report)
    assert exits[:2] == [("run", None), ("run-again", None)]
    for sid in AFTER | BEFORE:
        assert [kind for run_id, kind in exits if run_id == sid] == [SimulatedCrash, None]


def test_the_subject_is_what_enter_returns_and_close_is_not_called_twice() -> None:
    closed: ClassVar[list[str]] = []

    class Agent(SeedAgent):
        def close(self) -> None:
            closed.append("agent")

    class Launcher:
        def __init__(self, ctx: Context) -> None:
            self.agent = Agent(ctx, MemoryStore())

        def __enter__(self) -> Agent:
            return self.agent

        def __exit__(self, *exc: object) -> None:
            closed.append("launcher")

    assert conform(Launcher, inputs=JOBS, only="run").passed
    assert closed == ["launcher", "launcher"]  # the manager owns the teardown


def test_close_that_raises_after_a_clean_start_is_resume_crashed() -> None:
    class Leaky(SeedAgent):
        def close(self) -> None:
            if self.ctx.run_id != "run" and self.ctx.run_id != "run-again":
                raise OSError("connection already closed")

    report = conform(factory(Leaky), inputs=JOBS, only="run-2")

    # The crashed start's close() error is only noted; the resume's is a finding.
    assert at(report.findings) == {("run-2", "resume_crashed")}
    assert "resume 1 raised: close() raised: OSError: connection already closed" in (
        report.findings[0].message
    )
    assert len(report.notes) == 1
    assert report.notes[0].startswith(
        "run-2: close() after the crash raised: OSError: connection already closed (at "
    )


def test_in_process_mode_a_dying_start_is_closed_but_a_killed_child_is_not(
    tmp_path: Path,
) -> None:
    class Closing(FileAgent):
        def close(self) -> None:
            with (tmp_path / "closed.log").open("a") as log:
                log.write(f"{self.ctx.run_id} {os.getpid()}\n")

    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    conform(lambda ctx: Closing(ctx, tmp_path / "a" / f"{ctx.run_id}.log"), JOBS, only="run-2")
    in_process = (tmp_path / "closed.log").read_text().split()
    (tmp_path / "closed.log").unlink()
    conform(
        lambda ctx: Closing(ctx, tmp_path / "b" / f"{ctx.run_id}.log"),
        JOBS,
        only="run-2",
        mode="process",
    )
    as_process = (tmp_path / "closed.log").read_text().splitlines()

    assert in_process[::2] == ["run", "run-again", "run-2", "run-2"]
    assert set(in_process[1::2]) == {str(os.getpid())}
    # The child killed at its crash point ran no close(); the three that ended did.
    assert [line.split()[0] for line in as_process] == ["run", "run-again", "run-2"]
    assert str(os.getpid()) not in {line.split()[1] for line in as_process}


def test_a_subject_without_close_or_enter_needs_no_teardown() -> None:
    class Plain:
        def __init__(self, ctx: Context) -> None:
            self.ctx = ctx

        def step(self, job: str) -> Any:
            return self.ctx.effect("charge", job, key=job)

    report = conform(Plain, inputs=JOBS)
    assert report.passed
    assert at(report.findings) == expect("duplicate_effect", set())
