"""A bug inside a pool worker's run (``pool_bug``): what the pool worker does after it.

A fresh pool supervisor of the world's class (no gates, as :mod:`properties.pool_open`)
gets worker transports whose model raises a bug (a ``RuntimeError``, nothing the client
expects) at the run's first question. The worker's ``holding`` records it on the run
(``UnexpectedError``, resumable, one ERROR line with its traceback); the pool worker then
exits 70 instead of taking another run on whatever state the bug left (``run_leased``:
unfit after a bug or a database error), and says nothing more of it (the error was
reported). Until 2026-12-06 no pool worker met a bug inside a run: ``not unfit and
connection_fit`` as ``or``, and the ``reported`` test inverted, survived.

Before a pool worker holds its run (``unheld``), an error nobody expects -- the database
refusing its adoption of the supervisor's claim with a trigger's error, not a lost
connection -- is ``run_leased``'s own to say: one ``unexpected`` ERROR line, exit 70, no
other run. Until 2026-12-07 nothing reached that handler: its type and its ``False``
survived.

The waits on real time are for processes to do their work (bounded by
:data:`~properties.pool_loop.LOOP_WAIT`), never to expire anything.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Final

import httpx

from agent_runtime.errors import EXIT_SOFTWARE
from agent_runtime.supervisor.supervision import Supervisor
from agent_runtime.supervisor.workerpool import Transports, WorkerProcess

from . import sqlfile
from .pool_loop import LOOP_POLL, create_runs, loop_supervisor, reap_until_gone, wait_until
from .pool_stop import shut_down
from .violations import Violation

if TYPE_CHECKING:
    from .pool_runner import PoolRunner

BUG: Final = "a bug in the model's client"
EXIT_WAIT: Final = 5.0  # seconds a worker that recorded its run's stop has to exit


class _Raising(httpx.BaseTransport):
    def handle_request(self, request: httpx.Request) -> httpx.Response:
        raise RuntimeError(BUG)


class _BuggyModel:
    """The world's worker transports, its model's raising a bug (unless not ``buggy``);
    the worker's ERROR lines (every logger of the runtime) to a file."""

    def __init__(self, setup: Transports, log_path: Path, *, buggy: bool = True) -> None:
        self.setup = setup
        self.log_path = log_path
        self.buggy = buggy

    def __call__(self) -> Mapping[str, httpx.BaseTransport]:
        said = logging.FileHandler(self.log_path)  # in the worker
        said.setFormatter(logging.Formatter("%(levelname)s %(message)s"))
        said.setLevel(logging.ERROR)
        for name in ("agent_runtime.supervisor.workerpool", "agent_runtime.loop.stopping"):
            logger = logging.getLogger(name)
            logger.addHandler(said)
            logger.setLevel(logging.ERROR)  # the suite quiets the runtime's loggers
        return {**self.setup(), "model": _Raising()} if self.buggy else self.setup()


def _handed(
    sup: Supervisor, run: str, name: str, problems: list[Violation]
) -> WorkerProcess | None:
    """The worker the supervisor's first pass hands ``run`` to; None (the supervisor shut
    down, a violation in ``problems``) when it hands it to none."""
    sup.reap()
    sup.sweep()
    holder = next((w for w in sup.busy if w.lease and w.lease.run_id == run), None)
    if holder is None:
        shut_down(sup, name, problems)
        problems.append(Violation("pool_bug", run, None, f"run {run} was not handed to a worker"))
    return holder


def _stopped(runner: PoolRunner, run: str) -> bool:
    row = sqlfile.one(runner.conn, "failed_run", {"run": run})
    return row is not None and row["failure"] is not None


def bug_problems(runner: PoolRunner) -> list[Violation]:
    """A pool worker whose run meets a bug: the run keeps it, resumable; one ERROR line;
    the worker exits 70 and takes no other run."""
    (run,) = create_runs(runner, "bug", ("provisioning",))
    log_path = runner.log_dir / "bug.log"
    log_path.unlink(missing_ok=True)
    sup = loop_supervisor(runner, LOOP_POLL, transports=_BuggyModel(runner.world.setup, log_path))
    problems: list[Violation] = []
    holder = _handed(sup, run, "bug", problems)
    if holder is None:
        return problems
    wait_until(lambda: _stopped(runner, run))  # its stop is recorded: it is leaving now
    gone = reap_until_gone(sup, [holder.pid], EXIT_WAIT)
    shut_down(sup, "bug", problems)
    text = log_path.read_text() if log_path.exists() else ""
    lines = [line for line in text.splitlines() if line.startswith("ERROR ") and run in line]
    row = sqlfile.one(runner.conn, "failed_run", {"run": run})
    failure = "" if row is None else str(row["failure"])
    kept = row is not None and row["status"] == "running" and row["owner"] is None
    if not gone or holder.exit_code != EXIT_SOFTWARE or len(lines) != 1 or not kept:
        problems.append(
            Violation(
                "pool_bug",
                run,
                None,
                f"a pool worker whose run met a bug ({BUG}) ended {holder.exit_code} "
                f"(gone: {gone}), said {lines}, and left the run {row and row['status']} with "
                f"{failure[:80]!r}: the run keeps the bug, resumable, in one ERROR line, and "
                f"the worker exits {EXIT_SOFTWARE} rather than take another run",
            )
        )
    elif not failure.startswith("UnexpectedError: RuntimeError: " + BUG):
        problems.append(Violation("pool_bug", run, None, f"the run says {failure!r}"))
    return problems


def unheld_problems(runner: PoolRunner) -> list[Violation]:
    """A pool worker meets an error nobody expects before it holds its run: the database
    refuses its adoption of the supervisor's claim with an error of its own (a trigger's:
    not a lost connection, which the worker knows). It says so in one ERROR line, exits 70
    rather than take another run, and the supervisor frees the run, blaming that exit."""
    (run,) = create_runs(runner, "unheld", ("provisioning",))
    log_path = runner.log_dir / "unheld.log"
    log_path.unlink(missing_ok=True)
    transports = _BuggyModel(runner.world.setup, log_path, buggy=False)
    sqlfile.rows(runner.conn, "refuse_adoption")
    sqlfile.rows(runner.conn, "refuse_adoption_on")
    problems: list[Violation] = []
    try:
        sup = loop_supervisor(runner, LOOP_POLL, transports=transports)
        holder = _handed(sup, run, "unheld", problems)
        if holder is None:
            return problems
        gone = reap_until_gone(sup, [holder.pid], EXIT_WAIT)
        shut_down(sup, "unheld", problems)
    finally:
        sqlfile.rows(runner.conn, "refuse_adoption_off")
    text = log_path.read_text() if log_path.exists() else ""
    lines = [line for line in text.splitlines() if line.startswith("ERROR ") and run in line]
    row = sqlfile.one(runner.conn, "failed_run", {"run": run})
    failure = "" if row is None else str(row["failure"])
    said = len(lines) == 1 and lines[0].startswith(f"ERROR unexpected run={run} ")
    if not gone or holder.exit_code != EXIT_SOFTWARE or not said or "code 70" not in failure:
        problems.append(
            Violation(
                "pool_bug",
                run,
                None,
                f"a pool worker whose adoption of {run} raised an error nobody expects ended "
                f"{holder.exit_code} (gone: {gone}), said {lines}, and left the run with "
                f"{failure[:80]!r}: one ERROR line, exit {EXIT_SOFTWARE} rather than take "
                "another run, the run freed blaming that exit",
            )
        )
    return problems
