"""A pool supervisor's pool kept whole while idle workers, a spare and itself die.

The schedules' deaths are of busy workers; here a fresh pool supervisor of the world's
class (the schedules' agents and mocks, no gates, as :mod:`properties.pool_loop` has it)
is driven pass by pass (``reap()``, ``sweep()``) through the deaths no schedule makes:

- ``pool_kept``: the first pass starts one worker per claimed run and nothing more (a
  run whose id no worker would take, written straight into the table, is failed, not
  handed out); once the runs are over the workers that took them are still there, open
  and idle (a pool worker serves run after run, also after one that stopped resumably:
  the support run's desk is out for every attempt of its lookup, so it is released to
  its backoff, to end done once the clock has passed it). An idle worker SIGKILLed and not reaped
  yet is passed over when the next run is handed out (its pipe is broken: the run goes to
  a live, open worker in the same pass); once reaped its death is said (``worker-gone``)
  and it is replaced, the pool keeping its size. The next run goes to an open worker, not
  to the replacement still opening. Once every open worker is busy a spare is started; a
  spare that dies before it opened is said, not replaced, and no other spare is tried
  until a worker opens again. A worker that hangs holding a run until its lease has run
  out is killed, reaped and its run handed on in one pass; one that dies of SIGHUP is a
  death like any other, and one killed while the database is away leaves its run to its
  lease, said (:mod:`properties.pool_deaths`). Once stopping, a pass claims
  nothing. When the supervisor dies (its socket to the server closes without a goodbye,
  its pipes close), its backend ends at once (no worker kept a copy of that socket: a
  killed supervisor's locks must not outlive it) and every idle worker leaves with
  ``EXIT_DONE``.


The waits on real time are for processes to do their work (:data:`LOOP_WAIT`), never to
expire anything.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Final

from agent_runtime.errors import EXIT_DONE
from agent_runtime.store import db
from agent_runtime.supervisor.supervision import Supervisor
from agent_runtime.supervisor.workerpool import WorkerProcess

from . import sqlfile
from .api_corners import AGED
from .pool_deaths import death_while_the_database_is_away, hangup_is_a_death
from .pool_hearing import hearing
from .pool_loop import (
    LOOP_POLL,
    LOOP_WAIT,
    SETTLE,
    create_runs,
    ends_done,
    hand_out,
    kill_and_reap,
    loop_supervisor,
    passes_until,
    reap_until_gone,
    unfinished,
)
from .pool_modes import as_given
from .pool_stop import shut_down
from .violations import Violation

if TYPE_CHECKING:
    from .pool_runner import PoolRunner

# five runs: five workers, so that with two of them busy three are idle to be handed runs
KEPT_KINDS: Final = ("provisioning", "support", "provisioning", "provisioning", "provisioning")
BAD_ID: Final = "kept\abell"  # a run id no worker would take (a control character)
BACKEND_GONE: Final = 10.0  # seconds the server may take to end a closed socket's backend
BACKOFF_PAST: Final = 60.0  # seconds of the database clock past any run's backoff

Said = list[tuple[int, str]]


def _dead(pid: int) -> bool:
    """Whether ``pid`` has exited and waits to be reaped (a zombie), read from /proc."""
    deadline = time.monotonic() + LOOP_WAIT
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError):
            stat = Path(f"/proc/{pid}/stat").read_text()
            if stat.rsplit(")", 1)[1].split()[0] == "Z":
                return True
        time.sleep(SETTLE)
    return False


def _said(said: Said, start: str) -> bool:
    return any(line.startswith(start) for _, line in said)


def kept_problems(runner: PoolRunner) -> list[Violation]:
    """A pool supervisor's workers as idle ones, an unopened spare and itself die."""
    runs = create_runs(runner, "kept", KEPT_KINDS)
    supervisor = loop_supervisor(runner, LOOP_POLL, as_given("pool"))
    problems: list[Violation] = []
    stopped: list[WorkerProcess] = []

    def wrong(what: str) -> None:
        problems.append(Violation("pool_kept", None, None, what))

    # its workers (forks of this process) must die of a SIGHUP as production's do: a caller
    # started under nohup ignores it, and a fork would inherit that
    hangup = signal.signal(signal.SIGHUP, signal.SIG_DFL)
    try:
        with hearing(lambda: 0) as said:
            try:
                if _kept(runner, supervisor, runs, stopped, wrong, said):
                    return problems  # it died: nothing is left to stop
            finally:
                for proc in stopped:
                    proc.signal(signal.SIGCONT)
            shut_down(supervisor, "pool", problems)
    finally:
        signal.signal(signal.SIGHUP, hangup)
    return problems


def _kept(
    runner: PoolRunner,
    sup: Supervisor,
    runs: list[str],
    stopped: list[WorkerProcess],
    wrong: Callable[[str], None],
    said: Said,
) -> bool:
    """The story; True once the supervisor died at its end."""
    db.run(runner.conn, "create_run", {"run": BAD_ID, "agent": "provisioning", "input": None})
    outage = runner.settings.tool_retries + 1  # every attempt of the support run's lookup
    runner.remotes.set_desk_faults(fail_lookups=outage)
    released = runs[KEPT_KINDS.index("support")]
    sup.reap()
    sup.sweep()
    first = set(sup.workers)
    if len(first) != len(runs):
        wrong(
            f"the first pass over {len(runs)} pending runs (and one whose id no worker would "
            f"take) started {len(first)} pool workers: one per claimed run, no spare before "
            "any worker opened"
        )
        return False
    statuses = {row["id"]: row["status"] for row in sqlfile.rows(runner.conn, "statuses")}
    if statuses.get(BAD_ID) != "failed":
        wrong(f"a run whose id no worker would take is {statuses.get(BAD_ID)}, not failed")

    def settled() -> bool:
        idle = all(w.ready and w.idle for w in sup.workers.values())
        return idle and set(unfinished(runner, runs)) <= {released}

    if not passes_until(sup, settled) or not unfinished(runner, [released]):
        wrong(
            f"runs {unfinished(runner, runs)} not done, or workers not idle, in {LOOP_WAIT:g}s "
            f"({released} must wait out its backoff: its desk was out for {outage} lookups)"
        )
        return False
    if not first <= set(sup.workers) or any(w.channel is None for w in sup.workers.values()):
        wrong(
            f"after {len(runs)} runs the pool holds workers {sorted(sup.workers)}, "
            f"{sum(w.channel is None for w in sup.workers.values())} of them without a pipe, "
            f"not those that took the runs {sorted(first)}: a pool worker stays, open and "
            "idle, for the next run"
        )
        return False
    more = _dead_and_replaced(runner, sup, stopped, wrong, said)
    if more is None:
        return False
    if not _spare_dies(runner, sup, stopped, wrong, said, more):
        return False
    everything = [*runs, *more]
    others = [r for r in everything if r != released]
    if not passes_until(sup, lambda: not unfinished(runner, others)):
        wrong(f"runs {unfinished(runner, others)} not done in {LOOP_WAIT:g}s once resumed")
        return False
    runner._advance(BACKOFF_PAST)  # no worker holds a run: no lease runs out with it
    if not passes_until(sup, lambda: not unfinished(runner, everything)):
        wrong(f"{released} not done in {LOOP_WAIT:g}s after its backoff passed")
        return False
    if not _hung_taken_back(runner, sup, wrong, said):
        return False
    if not hangup_is_a_death(runner, sup, wrong):
        return False
    if not death_while_the_database_is_away(runner, sup, wrong, lambda s: _said(said, s)):
        return False
    (late,) = create_runs(runner, "late", ("provisioning",), reset=False)
    sup.stopping = True  # what its SIGTERM handler does, here between two passes
    sup.reap()
    sup.sweep()
    row = next(r for r in sqlfile.rows(runner.conn, "leases") if r["id"] == late)
    if sup.busy or row["generation"] != AGED or row["owner"] is not None:
        wrong(
            f"a stopping supervisor's pass left {late} at generation {row['generation']}, "
            f"owner {row['owner']}: once stopping it claims nothing"
        )
    _hang_up(runner, sup, wrong)
    return True


def _hung_taken_back(
    runner: PoolRunner, sup: Supervisor, wrong: Callable[[str], None], said: Said
) -> bool:
    """A worker hangs (SIGSTOP) holding a run until its lease has run out: the pass whose
    watchdog kills it also reaps it and hands the run to another worker."""
    handed = hand_out(runner, sup, "hung", wrong)
    if handed is None:
        return False
    hung, holder = handed
    holder.signal(signal.SIGSTOP)
    runner._advance(sup.settings.lease + 1.0)  # its lease ran out a second ago
    sup._next_watch = 0.0  # its watchdog is due (it looks twice a poll of real time)
    sup.sweep()
    taker = next((w for w in sup.busy if w.lease and w.lease.run_id == hung), None)
    if holder.pid in sup.workers or taker is None or taker is holder:
        wrong(
            f"the pass whose watchdog killed hung worker {holder.pid} (run {hung}) left it "
            f"among its workers ({holder.pid in sup.workers}) and {hung} with "
            f"{taker and taker.pid}: that pass reaps it and hands the run on at once"
        )
        return False
    if not _said(said, f"worker-hung run={hung} "):
        wrong(f"the hung worker {holder.pid}'s kill was not said: worker-hung run={hung}")
    return ends_done(runner, sup, hung, wrong, "its hung worker was killed")


def _dead_and_replaced(
    runner: PoolRunner,
    sup: Supervisor,
    stopped: list[WorkerProcess],
    wrong: Callable[[str], None],
    said: Said,
) -> list[str] | None:
    """An idle worker dies; the runs handed out meanwhile go to live, open workers (each
    stalled at once: busy until the story's end)."""
    size = len(sup.workers)
    victim = next(iter(sup.workers.values()))  # the first a hand-out tries
    victim.signal(signal.SIGKILL)
    if not _dead(victim.pid):
        wrong(f"the SIGKILLed idle worker {victim.pid} did not die in {LOOP_WAIT:g}s")
        return None
    (one,) = create_runs(runner, "next", ("provisioning",), reset=False)
    sup.sweep()  # no reap first: the supervisor does not know yet
    taker = next((w for w in sup.busy if w.lease and w.lease.run_id == one), None)
    if taker is None or taker is victim:
        wrong(
            f"run {one}, handed out while idle worker {victim.pid} lay dead unreaped, went to "
            f"{taker and taker.pid}: a broken pipe passes the run on to a live worker"
        )
        return None
    taker.signal(signal.SIGSTOP)
    stopped.append(taker)
    if not reap_until_gone(sup, [victim.pid]):
        wrong(f"the supervisor never let go of its dead idle worker {victim.pid}")
        return None
    if not _said(said, f"worker-gone pid={victim.pid} code=-9"):
        wrong(f"an idle worker's death (SIGKILL, pid {victim.pid}) was not said: worker-gone")
    sup.sweep()
    if len(sup.workers) != size:
        wrong(
            f"after an idle worker of a pool of {size} died, the next pass left "
            f"{len(sup.workers)} workers: a dead pool worker is replaced, the pool keeps its size"
        )
        return None
    (two,) = create_runs(runner, "then", ("provisioning",), reset=False)
    sup.reap()
    open_idle = [w.pid for w in sup.workers.values() if w.idle and w.ready]
    sup.sweep()
    taker = next((w for w in sup.busy if w.lease and w.lease.run_id == two), None)
    if taker is None or (open_idle and taker.pid not in open_idle):
        wrong(
            f"run {two} went to {taker and taker.pid} though workers {open_idle} were open "
            "and idle: a run goes to an open worker first, not to one still opening"
        )
        return None
    taker.signal(signal.SIGSTOP)
    stopped.append(taker)
    return [one, two]


def _spare_dies(
    runner: PoolRunner,
    sup: Supervisor,
    stopped: list[WorkerProcess],
    wrong: Callable[[str], None],
    said: Said,
    more: list[str],
) -> bool:
    """Every worker busy and stalled: a spare is started; it dies unopened, and stays so."""
    idle = [w for w in sup.workers.values() if w.idle]
    for proc in idle:
        proc.signal(signal.SIGSTOP)
        stopped.append(proc)
    more += create_runs(runner, "busy", ("provisioning",) * len(idle), reset=False)
    count, busy = len(sup.workers), len(sup.busy)
    sup.reap()
    sup.sweep()
    spares = [w for w in sup.workers.values() if w.idle]
    if any(not w.lease for w in idle) or len(spares) != 1:
        wrong(
            f"with {busy} workers busy and its {len(idle)} idle ones handed as many runs "
            f"({sum(not w.lease for w in idle)} left without one: room for "
            f"{sup.settings.max_workers - busy} claims), every open worker busy, the "
            f"supervisor kept {len(spares)} spares: one while there is room"
        )
        return False
    spare = spares[0]
    if not kill_and_reap(sup, spare):
        wrong(f"the supervisor never let go of its SIGKILLed spare {spare.pid}")
        return False
    if not _said(said, f"worker-gone pid={spare.pid} code=-9"):
        wrong(f"an unopened spare's death (SIGKILL, pid {spare.pid}) was not said: worker-gone")
    for _ in range(2):
        sup.reap()
        sup.sweep()
    if len(sup.workers) != count:
        wrong(
            f"a spare died before it opened, yet two passes later there are "
            f"{len(sup.workers)} workers, not {count}: it is not replaced, and no other "
            "spare is tried until a worker opens again"
        )
    for proc in stopped:
        proc.signal(signal.SIGCONT)
    stopped.clear()
    return True


def _hang_up(runner: PoolRunner, sup: Supervisor, wrong: Callable[[str], None]) -> None:
    """The supervisor dies (SIGKILL: its socket to the server closes without a goodbye,
    its pipes and wake-up pipe close): its backend ends at once, no worker holding a copy
    of that socket; every idle worker leaves with EXIT_DONE."""
    workers = list(sup.workers.values())
    backend = sup.conn.info.backend_pid
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sup.conn.fileno())  # our end of the socket gone; psycopg's fd harmless
    os.close(devnull)
    deadline = time.monotonic() + BACKEND_GONE
    while sqlfile.one(runner.conn, "backend_alive", {"pid": backend}) is not None:
        if time.monotonic() > deadline:
            wrong(
                f"the dead supervisor's backend {backend} lived on {BACKEND_GONE:g}s while its "
                f"workers {sorted(sup.workers)} lived: a forked worker closes its copy of the "
                "supervisor's connection, or a killed supervisor's locks outlive it"
            )
            break
        time.sleep(SETTLE)
    for proc in workers:
        proc.close()
    with contextlib.suppress(Exception):
        sup.conn.close()
    for fd in (sup._wake_r, sup._wake_w):
        with contextlib.suppress(OSError):
            os.close(fd)
    codes: dict[int, int | None] = {}
    deadline = time.monotonic() + LOOP_WAIT
    for proc in workers:
        while proc.poll() is None and time.monotonic() < deadline:
            time.sleep(SETTLE)
        if proc.poll() is None:
            proc.signal(signal.SIGKILL)
            os.waitpid(proc.pid, 0)
        codes[proc.pid] = proc.exit_code if proc.exit_code is not None else None
    sup.workers.clear()
    if any(code != EXIT_DONE for code in codes.values()):
        wrong(
            f"its supervisor gone, the idle pool workers ended {codes}: each leaves with "
            f"{EXIT_DONE} once its supervisor hangs up"
        )
