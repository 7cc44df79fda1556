"""A pool past the small ints (``pool_size``): a supervisor whose ``--max-workers`` is
:data:`BIG` keeps no spare once that many workers are busy.

The suite's pools have two or three workers; ``_room``'s ``len(workers) <
max_workers`` written ``is not`` holds for every size up to 256 (the ints the interpreter
shares), and starts a spare beyond a full pool past it (until 2026-12-07 it survived). The
busy workers are stand-ins -- handles with a run and no pipe, what the supervisor reads of
a busy worker -- since :data:`BIG` processes and connections are more than the suite's
database admits; the spare the slip starts is a real process, stopped after.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from agent_runtime.store.records import Lease
from agent_runtime.supervisor.workerpool import WorkerProcess

from .pool_loop import LOOP_POLL, loop_supervisor
from .pool_stop import shut_down
from .violations import Violation

if TYPE_CHECKING:
    from .pool_runner import PoolRunner

BIG: Final = 257  # the first pool size the interpreter does not share as an int


def size_problems(runner: PoolRunner) -> list[Violation]:
    """A full pool of :data:`BIG` busy workers: the supervisor asked for a spare starts none."""
    runner.reset()
    sup = loop_supervisor(runner, LOOP_POLL, max_workers=BIG)
    busy = {
        -1 - n: WorkerProcess(
            pid=-1 - n, lease=Lease(run_id=f"big{n}", owner="stand-in", generation=1), ready=True
        )
        for n in range(BIG)
    }
    sup.workers.update(busy)
    problems: list[Violation] = []
    try:
        sup._keep_spare()
    finally:
        started = [pid for pid in sup.workers if pid not in busy]
        for pid in busy:
            del sup.workers[pid]
        shut_down(sup, "size", problems)
    if started:
        problems.append(
            Violation(
                "pool_room",
                None,
                None,
                f"a supervisor of --max-workers {BIG} with {BIG} busy workers started a "
                f"spare ({len(started)} more): never more than max_workers processes",
            )
        )
    return problems
