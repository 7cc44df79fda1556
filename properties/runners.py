"""The two runners of a schedule, and the database the command-line tools run them on.

- :class:`InProcessRunner`: workers are threads over their own connections, the
  mocks are in-process cores (about 8 ms an event: generation and shrinking);
- :class:`ProcessRunner`: workers are real processes -- forked from the runner, or
  a fresh interpreter each (``spawn="exec"``) -- dying by ``os._exit(1)`` or
  ``SIGKILL`` at a gate and frozen by ``SIGSTOP``; the mocks run under uvicorn.
"""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

import httpx

from .disruptions import CrashableServer
from .events import Event
from .logged import WorkerLines, replayed_truth, reported_truth
from .minimise import first_failure
from .outcomes import outcome_truth
from .pilots import Pilot, Start
from .process_pilot import ProcessPilot
from .remotes import HttpRemotes, InProcessRemotes, scratch_dir
from .rival import rival_refused
from .runner import ScheduleRunner
from .sends import AttemptCounts, read_sends
from .server import SuiteDatabase
from .thread_pilot import ConnectionPool, ThreadPilot
from .views import shown_truth
from .violations import Violation, Violations, raise_if

__all__ = ["InProcessRunner", "ProcessRunner", "first_failure", "make_runner", "suite_database"]


@contextlib.contextmanager
def suite_database() -> Iterator[SuiteDatabase]:
    """The database the CLIs (replay, nightly, bench) run schedules on: a cluster of the
    suite's own (``db_crash`` must be able to crash it), see ``SuiteDatabase.for_command``."""
    database = SuiteDatabase.for_command()
    try:
        yield database
    finally:
        database.close()


class InProcessRunner(ScheduleRunner):
    """Workers are threads over their own connections; the mocks are in-process cores."""

    mode = "inprocess"

    def __init__(
        self, url: str, *, variant: str | None = None, server: CrashableServer | None = None
    ) -> None:
        self._remotes = InProcessRemotes()
        self._pool = ConnectionPool(url)
        self._lines = WorkerLines().install()  # its workers' `replayed` lines (logged.py)
        self._attempts = AttemptCounts().install()  # its journals' attempt writes (sends.py)
        super().__init__(url, variant=variant, remotes=self._remotes, server=server)

    @property
    def transports(self) -> dict[str, httpx.BaseTransport]:
        """The in-process remotes' transports by name (``model``, ``cloud``, ``support``)."""
        return self._remotes.transports

    def close(self) -> None:
        super().close()
        self._pool.close()
        self._lines.remove()
        self._attempts.remove()

    def _clear(self) -> None:
        super()._clear()
        self._lines.clear()
        self._attempts.clear()

    def _on_restart(self, e: Event) -> str:
        live = {w.pilot.owner for w in self.workers if w.alive}
        self.problems += rival_refused(self.conn, e.run_name, live)  # rival.py
        return super()._on_restart(e)

    def check_final(self) -> None:
        super().check_final()
        now = self.observe()
        returned = [
            (w.label, w.run, w.pilot.outcome)
            for w in self.workers
            if isinstance(w.pilot, ThreadPilot) and w.pilot.outcome is not None
        ]
        stopped = [
            (w.label, w.run, w.pilot.stopped_with)
            for w in self.workers
            if isinstance(w.pilot, ThreadPilot) and w.pilot.stopped_with is not None
        ]
        lines = self._lines.taken()
        found = replayed_truth(now, lines) + reported_truth(stopped, lines) + read_sends(self.conn)
        found += self._attempts.problems(self.conn) + shown_truth(self.conn, now)
        raise_if(found + outcome_truth(now, returned))

    def _after_db_crash(self) -> None:
        self._pool.drop()  # every spare connection died with the server

    def _pilot(self, start: Start) -> Pilot:
        return ThreadPilot(
            start,
            pool=self._pool,
            settings=self.settings,
            variant=self.variant,
            transports=self._remotes.transports,
            support_url=self._remotes.support_url,
        )


class ProcessRunner(ScheduleRunner):
    """Workers are real processes (forked, or ``spawn="exec"``); the mocks run under uvicorn."""

    mode = "process"

    def __init__(
        self,
        url: str,
        *,
        variant: str | None = None,
        spawn: Literal["fork", "exec"] = "fork",
        log_dir: Path | None = None,
        server: CrashableServer | None = None,
    ) -> None:
        self.spawn: Literal["fork", "exec"] = spawn
        self._own_log_dir = log_dir is None
        self.log_dir = log_dir or scratch_dir("properties-workers-")
        super().__init__(url, variant=variant, remotes=HttpRemotes(), server=server)

    def close(self) -> None:
        super().close()
        if self._own_log_dir:
            shutil.rmtree(self.log_dir, ignore_errors=True)

    def _pilot(self, start: Start) -> Pilot:
        return ProcessPilot(
            start,
            url=self.url,
            settings=self.settings,
            variant=self.variant,
            support_url=self.remotes.support_url,
            spawn=self.spawn,
            log_path=self.log_dir / "workers.log",
        )


def make_runner(
    mode: str, database: SuiteDatabase, *, variant: str | None = None
) -> ScheduleRunner:
    if mode == "inprocess":
        return InProcessRunner(database.url, variant=variant, server=database)
    if mode == "pool":
        from .pool_runner import PoolRunner  # the real supervisor: imported only when asked

        return PoolRunner(database.url, variant=variant, server=database)
    if mode in ("process", "fork", "exec"):
        spawn: Literal["fork", "exec"] = "exec" if mode == "exec" else "fork"
        return ProcessRunner(database.url, variant=variant, spawn=spawn, server=database)
    raise ValueError(f"unknown runner mode {mode!r}; use inprocess, process (fork), exec or pool")


def outcome_and_trace(runner: ScheduleRunner, events: list[Event]) -> tuple[Any, list[str]]:
    """What ``runner`` makes of ``events`` (a violation as its text) and its trace: the
    pair two runners of one schedule must agree on (differential, pool and mutation)."""
    try:
        outcome: Any = runner.replay(events)
    except (Violation, Violations) as exc:
        outcome = f"violation: {exc}"
    return outcome, list(runner.trace)
