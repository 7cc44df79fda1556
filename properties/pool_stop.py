"""A pool supervisor's stop as it really goes: how each of its workers ended.

``stop_supervisor`` is the supervisor's SIGTERM: its handler sets ``stopping`` and its
loop ends in ``shutdown()``, which SIGTERMs every worker (a pool worker has no handler
of its own: it dies at once, mid-step if it was in one), reaps them and hands their runs
back. :func:`shut_down` runs that ``shutdown()`` and reads what its own reaps heard (the
code each busy worker's run ended with) and how every worker process really exited, so
the runner judges each run's end by the real code, not by what a stop should give.

- ``pool_stop``: no worker of a stopping supervisor is SIGKILLed after the grace
  (``STOP_GRACE``): a worker it did not kill for hanging must end by the SIGTERM that
  hands its run back at once.
"""

from __future__ import annotations

import signal
from collections.abc import Callable

from agent_runtime.store.records import Lease
from agent_runtime.supervisor.supervision import Supervisor
from agent_runtime.supervisor.workerpool import WorkerProcess

from .violations import Violation

Key = tuple[str, int]  # (run, generation) of a lease


def shut_down(supervisor: Supervisor, name: str, problems: list[Violation]) -> dict[Key, int]:
    """``supervisor.shutdown()``; the code each run its busy workers held ended with (as its
    reaps heard it), and a ``pool_stop`` violation in ``problems`` for every worker that
    was SIGKILLed without having hung."""
    workers = list(supervisor.workers.values())
    heard: dict[Key, int] = {}
    reap: Callable[[], list[tuple[Lease, int]]] = supervisor.reap

    def reap_and_hear() -> list[tuple[Lease, int]]:
        ended = reap()
        heard.update(((lease.run_id, lease.generation), code) for lease, code in ended)
        return ended

    supervisor.reap = reap_and_hear  # type: ignore[method-assign]  # shutdown's own reaps
    try:
        supervisor.shutdown()
    finally:
        del supervisor.reap
    problems += killed_at_stop(workers, name)
    return heard


def killed_at_stop(workers: list[WorkerProcess], name: str) -> list[Violation]:
    """``pool_stop`` for each of a stopped supervisor's workers it SIGKILLed without cause
    (after the grace, not for hanging)."""
    return [
        Violation(
            "pool_stop",
            proc.lease.run_id if proc.lease is not None else None,
            None,
            f"pool worker {proc.pid}"
            + (f" holding {proc.lease.run_id}" if proc.lease is not None else "")
            + f" of the stopping {name} supervisor was SIGKILLed: a stop SIGTERMs every "
            "worker, which hands its run back at once, and kills none but a hung one",
        )
        for proc in workers
        if proc.exit_code == -signal.SIGKILL and proc.killed_for is None
    ]
