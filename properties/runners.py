"""The two runners of a schedule, and where the command-line tools find a database.

- :class:`InProcessRunner`: workers are threads over their own connections, the
  mocks are in-process cores (about 8 ms an event: generation and shrinking);
- :class:`ProcessRunner`: workers are real processes -- forked from the runner, or
  a fresh interpreter each (``spawn="exec"``) -- dying by ``os._exit(1)`` or
  ``SIGKILL`` at a gate and frozen by ``SIGSTOP``; the mocks run under uvicorn.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Final, Literal

import psycopg
from psycopg import sql
from psycopg.conninfo import make_conninfo

from .events import Event
from .invariants import Violation
from .pilots import ConnectionPool, Pilot, ProcessPilot, Start, ThreadPilot
from .remotes import HttpRemotes, InProcessRemotes, scratch_dir
from .runner import ScheduleRunner

PROPERTIES_DB: Final = "crashresume_properties"  # the replay's own database on the CLI cluster


def database_url() -> str:
    """Where the CLIs (replay, nightly, bench) run schedules; they empty its runs.

    ``PROPERTIES_DATABASE_URL``, else ``DATABASE_URL``, else a database of its own
    (``crashresume_properties``) on the CLI's local cluster, so that replaying never
    wipes the runs of the agent's own database.
    """
    for name in ("PROPERTIES_DATABASE_URL", "DATABASE_URL"):
        if os.environ.get(name):
            return os.environ[name]
    from agent_runtime.dbsource import cli_cluster

    base = cli_cluster().ensure_running()
    with psycopg.connect(base, autocommit=True) as conn:
        if not conn.execute(
            "SELECT 1 FROM pg_database WHERE datname = %s", (PROPERTIES_DB,)
        ).fetchone():
            conn.execute(
                sql.SQL("CREATE DATABASE {} ENCODING 'UTF8' TEMPLATE template0").format(
                    sql.Identifier(PROPERTIES_DB)
                )
            )
    return make_conninfo(base, dbname=PROPERTIES_DB)


class InProcessRunner(ScheduleRunner):
    """Workers are threads over their own connections; the mocks are in-process cores."""

    mode = "inprocess"

    def __init__(self, url: str, *, variant: str | None = None) -> None:
        self._remotes = InProcessRemotes()
        self._pool = ConnectionPool(url)
        super().__init__(url, variant=variant, remotes=self._remotes)

    def close(self) -> None:
        super().close()
        self._pool.close()

    def _pilot(self, start: Start) -> Pilot:
        return ThreadPilot(
            start,
            pool=self._pool,
            settings=self.settings,
            variant=self.variant,
            model_transport=self._remotes.model_transport,
            cloud_transport=self._remotes.cloud_transport,
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
    ) -> None:
        self.spawn: Literal["fork", "exec"] = spawn
        self._own_log_dir = log_dir is None
        self.log_dir = log_dir or scratch_dir("properties-workers-")
        super().__init__(url, variant=variant, remotes=HttpRemotes())

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
            spawn=self.spawn,
            log_path=self.log_dir / "workers.log",
        )


def make_runner(mode: str, url: str, *, variant: str | None = None) -> ScheduleRunner:
    if mode == "inprocess":
        return InProcessRunner(url, variant=variant)
    if mode in ("process", "fork", "exec"):
        return ProcessRunner(url, variant=variant, spawn="exec" if mode == "exec" else "fork")
    raise ValueError(f"unknown runner mode {mode!r}; use inprocess, process (fork) or exec")


def first_failure(
    runner: ScheduleRunner, events: Sequence[Event]
) -> Violation | AssertionError | None:
    """Replay ``events``; the violation it ends with, or None."""
    try:
        runner.replay(events)
    except AssertionError as exc:
        return exc
    return None
