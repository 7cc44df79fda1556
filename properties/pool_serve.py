"""A serving supervisor, as production runs it (``pool_serve``, gap class 20), and every
check of :mod:`properties.pool_loop` together (:func:`loop_problems`).

``serve()`` (not ``--once``) on a thread, against runs of two kinds, claims and finishes
them, keeps passing while idle (two idle passes: it must not return; at least one of two
idle waits lasts most of its poll: it does not spin), also after a wake (a signal's byte on
its wake-up pipe, drained: the wait after it is its poll again), with a pool worker alive
and idle for the next run, goes on passing after a database crash, and returns 0 once its
SIGTERM handler (``_on_stop``) ran, every worker gone.
"""

from __future__ import annotations

import itertools
import os
import signal
from typing import TYPE_CHECKING

from agent_runtime.supervisor import supervision

from .pool_loop import (
    IDLE_PASSES,
    IDLE_WAIT,
    LOOP_POLL,
    LOOP_WAIT,
    Looping,
    create_runs,
    drain_problems,
    loop_supervisor,
    timer_problems,
    unfinished,
    wait_until,
)
from .pool_stop import killed_at_stop
from .violations import Violation

if TYPE_CHECKING:
    from .pool_runner import PoolRunner


def serve_problems(runner: PoolRunner) -> list[Violation]:
    """``serve()`` on a thread: it finishes the runs, keeps serving while idle, and
    returns 0 once stopped, every worker ended by its SIGTERM."""
    runs = create_runs(runner, "serve")
    loop = Looping(loop_supervisor(runner, LOOP_POLL))
    loop.start(loop.supervisor.serve)
    problems: list[Violation] = []
    wait_until(lambda: loop.idle_passes >= IDLE_PASSES or not loop.alive)
    left = unfinished(runner, runs)
    if not loop.alive:
        problems.append(
            Violation(
                "pool_serve",
                None,
                None,
                f"serve() returned {loop.returned} after {loop.passes} passes "
                f"({loop.idle_passes} idle; runs not done: {left or 'none'}) and before any "
                "stop: a supervisor serves until SIGTERM/SIGINT, idle or not",
            )
        )
        return problems
    if left or loop.idle_passes < IDLE_PASSES:
        loop.abandon()
        return _serving(
            f"serve() made {loop.passes} passes in {LOOP_WAIT:g}s and left {left} "
            "unfinished: a serving supervisor claims and finishes every run"
        )
    gaps = [b - a for a, b in itertools.pairwise(loop.idle_at)]
    if max(gaps, default=0.0) < LOOP_POLL * IDLE_WAIT:
        problems.append(
            Violation(
                "pool_serve",
                None,
                None,
                f"serve() idle made passes {[round(g, 3) for g in gaps]}s apart: with nothing "
                f"to do it waits its poll ({LOOP_POLL:g}s) between passes (a worker's message "
                "may wake it early, not every time)",
            )
        )
    problems += _woken(loop)
    kept = [w for w in list(loop.supervisor.workers.values()) if w.idle and w.exit_code is None]
    if not kept:
        problems.append(
            Violation(
                "pool_serve",
                None,
                None,
                f"serve() in pool mode finished its runs with none of its workers "
                f"{sorted(w.pid for w in loop.workers)} left alive and idle: a pool worker "
                "stays for the next run",
            )
        )
    problems += _survives_db_crash(runner, loop)
    loop.supervisor._on_stop(signal.SIGTERM, None)  # its SIGTERM handler
    if not loop.join(supervision.STOP_GRACE + LOOP_WAIT):
        loop.abandon()
        return [Violation("pool_serve", None, None, "serve() did not return after its SIGTERM")]
    if loop.returned != [0] or loop.supervisor.workers:
        problems.append(
            Violation(
                "pool_serve",
                None,
                None,
                f"serve() stopped by SIGTERM returned {loop.returned}, leaving workers "
                f"{sorted(loop.supervisor.workers)}: it returns 0 with every worker gone",
            )
        )
    problems += killed_at_stop(loop.workers, "serve()")
    return problems


def _serving(what: str) -> list[Violation]:
    return [Violation("pool_serve", None, None, what)]


def _woken(loop: Looping) -> list[Violation]:
    """A wake (the byte a signal leaves on the wake-up pipe, ``signal.set_wakeup_fd``: a
    ``serve()`` on a thread installs no handler, so it is written here) is drained: an
    idle wait after it lasts the poll again."""
    since = len(loop.idle_at)
    os.write(loop.supervisor._wake_w, b"\0")  # the supervisor has no public seam for it
    wait_until(lambda: len(loop.idle_at) >= since + IDLE_PASSES or not loop.alive)
    after = loop.idle_at[since:]
    gaps = [b - a for a, b in itertools.pairwise(after)]
    if max(gaps, default=0.0) >= LOOP_POLL * IDLE_WAIT:
        return []
    return _serving(
        f"after a wake (a signal's byte on its wake-up pipe) serve() idle made {len(after)} "
        f"passes {[round(g, 3) for g in gaps[:5]]}{'...' if gaps[5:] else ''}s apart: a "
        "byte never drained makes every wait return at once (a supervisor that spins "
        "after any signal)"
    )


def _survives_db_crash(runner: PoolRunner, loop: Looping) -> list[Violation]:
    """The database crashes under an idle ``serve()`` and stays away for two of its passes
    (each fails, its reconnect fails): it goes on, and once the server is back it passes
    :data:`IDLE_PASSES` times more."""
    if runner.server is None:
        return []
    tries = loop.reconnects

    def away() -> None:  # down for two of its passes: each fails, and it tries again
        wait_until(lambda: loop.reconnects >= tries + 2 or not loop.alive)

    runner.server.crash(while_down=away)
    if not loop.alive:
        return _serving(
            f"serve() returned {loop.returned} while the database was down: a supervisor "
            "that cannot reconnect says so and tries again at its next pass"
        )
    passes = loop.passes
    wait_until(lambda: loop.passes >= passes + IDLE_PASSES or not loop.alive)
    if loop.alive and loop.passes >= passes + IDLE_PASSES:
        return []
    return _serving(
        f"serve() {'returned ' + str(loop.returned) if not loop.alive else 'stopped passing'}"
        " after a database crash: a serving supervisor says the error, reconnects and "
        "goes on (leases settle the rest)"
    )


def loop_problems(runner: PoolRunner) -> list[Violation]:
    """Every check of this module; the runner is left reset."""
    problems = timer_problems(runner) + serve_problems(runner) + drain_problems(runner)
    runner.reset()
    return problems
