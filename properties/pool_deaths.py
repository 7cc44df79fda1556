"""A busy pool worker's death by a signal the schedules never send, and one while the
database is away (``pool_kept``).

The schedules kill workers with SIGKILL or stop them with SIGTERM; a worker that dies by
any other signal (SIGHUP: its terminal hung up; SIGSEGV, an OOM killer's) died all the
same: its first death since the run's last progress sends the run again at once (its
lease ends the moment it is freed, not a second before), with no reason of its own (the
supervisor's ``free_after_exit``: a negative exit code is a death, whatever the signal).
Until 2026-12-06 only -9 and -15 were ever seen, and ``code < -1`` survived: a SIGHUP's
-1 was taken for an exit with a code, backed off and blamed on the worker.

A worker that dies holding a run while the database is down cannot have its run freed:
the supervisor says so (``release-failed run=R``) and goes on reaping, the run's lease
running out by itself (until 2026-12-06 nothing killed the handler's removal: the
schedules' database crashes never came while the supervisor freed a run).
"""

from __future__ import annotations

import signal
from collections.abc import Callable
from typing import TYPE_CHECKING

from agent_runtime.supervisor.supervision import Supervisor

from . import sqlfile
from .pool_loop import ends_done, hand_out, reap_until_gone

if TYPE_CHECKING:
    from .pool_runner import PoolRunner


def hangup_is_a_death(
    runner: PoolRunner,
    sup: Supervisor,
    wrong: Callable[[str], None],
) -> bool:
    """A worker holding a run dies of SIGHUP (sent while it is stopped, so it lands before
    its run is over): the pass after it hands the run on, its failure unwritten, and the
    run ends done."""
    handed = hand_out(runner, sup, "hup", wrong)
    if handed is None:
        return False
    hup, holder = handed
    for sent in (signal.SIGSTOP, signal.SIGHUP, signal.SIGCONT):
        holder.signal(sent)
    if not reap_until_gone(sup, [holder.pid]):
        wrong(f"worker {holder.pid}, sent SIGHUP, was not reaped")
        return False
    row = sqlfile.one(runner.conn, "failed_run", {"run": hup})
    sup.sweep()
    taker = next((w for w in sup.busy if w.lease and w.lease.run_id == hup), None)
    freed_at = row and row["updated_at"]  # the statement that freed it set both
    if row is None or row["failure"] is not None or taker is None:
        wrong(
            f"worker {holder.pid} died of SIGHUP holding {hup} (its first death), and the "
            f"run was left with failure {row and row['failure']!r}, until "
            f"{row and row['lease_expires_at']}, handed to {taker and taker.pid}: a death "
            "by any signal sends the run again at once, blaming nobody"
        )
        return False
    if row["lease_expires_at"] != freed_at:
        wrong(
            f"worker {holder.pid} died holding {hup} (its first death), freed at {freed_at} "
            f"with a lease that ends at {row['lease_expires_at']}: at once is the moment it "
            "was freed, neither before (a history that says the lease ran out while its "
            "worker lived) nor after"
        )
        return False
    return ends_done(runner, sup, hup, wrong, "its worker died of SIGHUP")


def death_while_the_database_is_away(
    runner: PoolRunner,
    sup: Supervisor,
    wrong: Callable[[str], None],
    heard: Callable[[str], bool],
) -> bool:
    """A worker holding a run is killed while the server is down; the supervisor reaps it
    then: it says it could not free the run, raises nothing, and once the server is back
    and the run's lease has run out, the run is handed on and ends done."""
    if runner.server is None:
        return True
    handed = hand_out(runner, sup, "down", wrong)
    if handed is None:
        return False
    down, holder = handed
    holder.signal(signal.SIGSTOP)  # holding it until the server is down
    raised: list[BaseException] = []

    def away() -> None:
        holder.signal(signal.SIGKILL)
        try:
            reap_until_gone(sup, [holder.pid])
        except Exception as exc:  # the check's finding, not the check's failure
            raised.append(exc)

    runner.server.crash(while_down=away)
    runner._reconnect()
    sup._reconnect()  # what serve() does after a failed pass
    if raised or not heard(f"release-failed run={down} "):
        wrong(
            f"worker {holder.pid} died holding {down} while the database was down, and the "
            f"supervisor's reap raised {raised!r} (said release-failed: {heard('release-')})"
            ": it says it could not free the run and goes on, the lease running out by itself"
        )
        return False
    runner._advance(sup.settings.lease + 1.0)  # the dead worker's lease runs out
    return ends_done(runner, sup, down, wrong, "its lease ran out")
