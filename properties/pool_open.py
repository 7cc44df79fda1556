"""A pool worker that cannot open, for a reason it can name and for a bug.

A fresh pool supervisor of the world's class is given worker transports that fail its
worker's open (as :mod:`properties.pool_kept`, no gates):

- ``pool_open``: a pool worker that cannot open (its in-process transports name a remote
  there is none of, or raise a bug) exits with the error's code (2, or 70 for the bug),
  says why in one ERROR line naming the run it was started for, and is not started again
  and again: no spare while none opened. The run it held says so: ``the worker exited
  with code N (see its log)``.

The waits on real time are for processes to do their work (bounded by
:data:`~properties.pool_loop.LOOP_WAIT`), never to expire anything.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Final

import httpx

from agent_runtime.errors import EXIT_SOFTWARE, EXIT_USAGE
from agent_runtime.store.journal import Journal

from .pool_loop import LOOP_POLL, create_runs, loop_supervisor, reap_until_gone
from .pool_stop import shut_down
from .violations import Violation

if TYPE_CHECKING:
    from .pool_runner import PoolRunner

UNKNOWN_REMOTE: Final = "modle"  # a transport name a worker must refuse
BROKEN: Final = "a bug in the worker's transports"
WORKERPOOL_LOG: Final = "agent_runtime.supervisor.workerpool"


class _Unopenable:
    """Worker transports that fail the worker's open: naming a remote there is none of
    (a ConfigError), or raising a bug (``broken``); the worker's log to a file."""

    def __init__(self, log_path: Path, *, broken: bool) -> None:
        self.log_path = log_path
        self.broken = broken

    def __call__(self) -> Mapping[str, httpx.BaseTransport]:
        said = logging.FileHandler(self.log_path)  # in the worker: what open_worker says
        said.setFormatter(logging.Formatter("%(levelname)s %(message)s"))
        logger = logging.getLogger(WORKERPOOL_LOG)
        logger.addHandler(said)
        logger.setLevel(logging.ERROR)  # the suite quiets the runtime's loggers; not this
        if self.broken:
            raise RuntimeError(BROKEN)
        return {UNKNOWN_REMOTE: httpx.BaseTransport()}


def open_problems(runner: PoolRunner) -> list[Violation]:
    """A pool worker that cannot open, for a reason it names and for a bug."""
    return _unopened(runner, broken=False) + _unopened(runner, broken=True)


def _unopened(runner: PoolRunner, *, broken: bool) -> list[Violation]:
    """A pool worker that cannot open: its exit code, its ERROR line, no spare."""
    (run,) = create_runs(runner, "unopened", ("provisioning",))
    log_path = runner.log_dir / "unopened.log"
    log_path.unlink(missing_ok=True)
    sup = loop_supervisor(runner, LOOP_POLL, transports=_Unopenable(log_path, broken=broken))
    problems: list[Violation] = []
    sup.reap()
    sup.sweep()
    started = list(sup.workers.values())
    reap_until_gone(sup, [w.pid for w in started])  # bounded: a worker left is judged below
    sup.reap()
    sup.sweep()
    left = len(sup.workers)
    shut_down(sup, "unopened", problems)
    text = log_path.read_text() if log_path.exists() else ""
    if broken:
        wanted, what, exit_code = f"ERROR unexpected run={run} error=", BROKEN, EXIT_SOFTWARE
    else:
        wanted, what, exit_code = f"ERROR ConfigError run={run} error=", UNKNOWN_REMOTE, EXIT_USAGE
    code = [w.exit_code for w in started]
    held = Journal(runner.conn).get_run(run)
    failure = held.failure if held is not None else None
    told = f"the worker exited with code {exit_code} (see its log)"
    if failure != told:  # what the run says of it: the supervisor's words, its code
        problems.append(
            Violation(
                "pool_open",
                run,
                None,
                f"the run of a pool worker that could not open says {failure!r}, not {told!r}",
            )
        )
    if code != [exit_code] or wanted not in text or what not in text or left:
        problems.append(
            Violation(
                "pool_open",
                run,
                None,
                f"a pool worker whose transports {'raise' if broken else 'name'} {what!r} "
                f"ended {code} and said {text.strip().splitlines()[:2]}; {left} workers after "
                f"the next pass: it exits {exit_code} with one ERROR line '{wanted}...' "
                "saying why, and none is started again before a worker opens",
            )
        )
    return problems
