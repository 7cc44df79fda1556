"""Long conform runs count scenarios on a terminal and print nothing anywhere else."""

from __future__ import annotations

import io
from typing import Any

import pytest

from crashresume import conform
from crashresume._progress import Progress


class FakeTerminal(io.StringIO):
    def isatty(self) -> bool:
        return True


class Keyed:
    def __init__(self, ctx: Any) -> None:
        self.ctx = ctx

    def step(self, job: str) -> None:
        self.ctx.effect("charge", job, key=f"charge:{job}")


def test_progress_is_drawn_on_a_terminal_and_cleared_at_the_end() -> None:
    screen = FakeTerminal()
    progress = Progress("conform subject", stream=screen)
    progress.update(3, 1, force=True)
    progress.close()
    assert "conform subject: 3 scenarios, 1 finding(s) so far" in screen.getvalue()
    assert screen.getvalue().endswith("\r\x1b[K")


def test_progress_writes_nothing_when_not_on_a_terminal() -> None:
    pipe = io.StringIO()
    progress = Progress("conform subject", stream=pipe)
    progress.update(3, 1, force=True)
    progress.close()
    assert pipe.getvalue() == ""


def test_conform_stays_quiet_on_stderr_when_it_is_not_a_terminal(
    capsys: pytest.CaptureFixture[str],
) -> None:
    report = conform(Keyed, inputs=[f"job-{i}" for i in range(50)])
    assert report.passed
    assert capsys.readouterr().err == ""
