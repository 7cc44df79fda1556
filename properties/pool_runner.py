"""The pool mode: schedules against the real supervisor and its long-lived pool workers.

:class:`PoolRunner` runs a schedule the way production runs: a run is created and the
supervisor (:class:`agent_runtime.supervisor.Supervisor`, ``spawn="pool"``, built in the
runner's process) claims it and hands it to one of its pool workers, which takes run
after run, of any of the four kinds, over the supervisor's own pipe. The runner decides
*when* the supervisor makes a pass (its loop's body: ``reap()``, then ``sweep()``), as it
decides every other move, so a schedule replays the same every time:

- ``start`` creates the run (pending, as a client would) and the supervisor passes;
- ``sweep`` and ``tick`` move the clock, the live workers beat, the supervisor passes
  (in production time passing means it polls);
- whenever a worker is done with a run or dies, the supervisor passes right after the
  event (it hears its children at once: their pipe, SIGCHLD), so a dead worker's run is
  freed and handed on at once, to the spare it keeps open;
- ``crash`` (``os._exit(1)``, or ``SIGKILL``), ``stall`` (``SIGSTOP``), ``resume``
  (``SIGCONT``) and ``sigterm`` hit the pool worker holding the run; ``hangup`` kills the
  supervisor (its pipes close: busy workers finish as orphans, idle ones leave);
  ``stop_supervisor`` is its SIGTERM (it stops every worker and hands their runs back);
  ``rival_sweep`` is a pass of a second supervisor on the same database, with a pool of
  its own. A stopped or killed supervisor is started again at the next pass;
- ``restart`` is a worker an operator starts by hand (a process of its own, as in the
  process runner's ``exec`` mode) beside the supervised ones.

Every invariant of the other runners holds here too, and the pool's own:

- ``pool_idle_wait``: no pass leaves a run claimable while its supervisor has room for a
  worker (an idle one, or a slot to start one). Since the supervisor passes at every clock
  move and every end, no run waits a lease and a poll for a free worker;
- ``pool_agent``: every gate a pool worker reaches is of the run it was handed, driven by
  that run's own agent (a long-lived worker must not carry one run's agent into the next);
- ``pool_one_run``: no pool worker drives a run it was not handed, or holds two live
  leases at once;
- ``pool_freed``: the run of a worker that died holding it is free (or claimed again)
  by the end of the supervisor's next pass: never left to its lease, nor held back by a
  backoff after its first death since progress;
- ``pool_ready``: at each pass, every pool worker its supervisor started has opened (the
  supervisor heard its hello) or is gone within ``READY_WAIT``: one whose hello is lost
  keeps the supervisor from keeping a spare;
- ``pool_room`` (:mod:`properties.pool_watch`): never more than ``max_workers`` pool
  workers, and a spare while there is room; a worker killed as stuck is explained only
  by its run's idleness as the suite measures it.
"""

from __future__ import annotations

import contextlib
import shutil
import signal
from pathlib import Path
from typing import Final

from agent_runtime.store import clock
from agent_runtime.store.journal import Journal
from agent_runtime.store.records import Lease, RunTask
from agent_runtime.supervisor.workerpool import WorkerProcess

from . import sqlfile
from .agents import suite_agents
from .disruptions import CrashableServer
from .driving import WorkerRec
from .events import Event
from .pilots import CRASHED, Exit, Pilot, Start
from .pool_checks import PoolChecks
from .pool_pilot import PoolPilot
from .pool_watch import WatchChecks, pid_of
from .pool_world import SIGTERMED, PoolWorld, Supervised
from .process_pilot import ProcessPilot
from .remotes import HttpRemotes, scratch_dir
from .runner import SETTINGS, ScheduleRunner

MAX_PASSES: Final = 8  # passes one event may cause (each hand-out may end a run at once)


class PoolRunner(ScheduleRunner, PoolChecks, WatchChecks):
    """The real supervisor and pool; the mocks under uvicorn, as in the process runner."""

    mode = "pool"

    def __init__(
        self,
        url: str,
        *,
        variant: str | None = None,
        log_dir: Path | None = None,
        server: CrashableServer | None = None,
        remotes: HttpRemotes | None = None,
    ) -> None:
        """``remotes``: mocks another runner started (a process runner's), borrowed: they
        are reset at every schedule as ever, and left running at :meth:`close`."""
        if variant not in (None, "correct"):
            raise ValueError(
                "the pool mode runs the real supervisor and Worker: a broken runtime's "
                "classes never reach its workers; replay a variant with --mode process"
            )
        self._own_log_dir = log_dir is None
        self.log_dir = log_dir or scratch_dir("properties-pool-")
        self._own_remotes = remotes is None
        remotes = remotes or HttpRemotes()
        # the supervisor's own workers really sleep: their retries do not back off
        settings = SETTINGS.with_changes(retry_backoff=0.0)
        super().__init__(url, variant=variant, remotes=remotes, server=server, settings=settings)
        self._agent_names = {k: a.name for k, a in suite_agents(remotes.support_url).items()}
        self._handing: dict[str, tuple[Supervised, WorkerProcess]] = {}
        self.world = PoolWorld(
            url,
            self.settings,
            support_url=remotes.support_url,
            log_dir=self.log_dir,
            conn=lambda: self.conn,
            expect_agent=self._agent_of,
        )

    def _agent_of(self, run: str) -> str | None:
        kind = self.kinds.get(run)
        return None if kind is None else self._agent_names[kind]

    def cleanup(self) -> None:
        super().cleanup()
        world = getattr(self, "world", None)
        if world is not None:
            world.cleanup()
        self._handing = {}

    def _clear(self) -> None:
        super()._clear()
        self._clear_watch()  # per example, kept past its cleanup for the stories' judges

    def close(self) -> None:
        if self._own_remotes:
            super().close()
        else:
            self.cleanup()
            with contextlib.suppress(Exception):
                clock.thaw(self.conn)
            self.conn.close()
        self.world.close()
        if self._own_log_dir:
            shutil.rmtree(self.log_dir, ignore_errors=True)

    # -- pilots -----------------------------------------------------------------------------

    def _pilot(self, start: Start) -> Pilot:
        handed = self._handing.pop(start.run_id, None)
        if handed is None:  # a worker started by hand (restart; settle's last resort)
            # a fresh interpreter: a fork would hold the supervisors' pipes open
            return ProcessPilot(
                start,
                url=self.url,
                settings=self.settings,
                variant=self.variant,
                support_url=self.remotes.support_url,
                spawn="exec",
                log_path=self.log_dir / "workers.log",
            )
        supervised, proc = handed
        return PoolPilot(start, world=self.world, supervised=supervised, proc=proc)

    def _pilot_rec(self, start: Start) -> WorkerRec:
        w = super()._pilot_rec(start)
        if isinstance(w.pilot, PoolPilot):
            self.world.adopt(w.pilot)
            if self.world.served[w.pilot.pid] > 1:  # a long-lived worker's next run
                self.stats.count("pool worker reused")
            if w.pilot.pid in self.world.poisoned:
                w.dropped = True  # its connection died with the database before this run
        return w

    def _mark_dropped(self, w: WorkerRec) -> None:
        super()._mark_dropped(w)
        if isinstance(w.pilot, PoolPilot):
            self.world.poisoned.add(w.pilot.pid)

    def _expected(self, w: WorkerRec, message: Exit) -> bool:
        if message.kind == SIGTERMED:
            return isinstance(w.pilot, PoolPilot) and w.pilot.terminated
        if message.kind == CRASHED and not w.crashed_by_us and isinstance(w.pilot, PoolPilot):
            # the supervisor may kill a worker that stopped beating, or one stuck
            return w.pilot.hung or self._killed_as_stuck(w.pilot)
        return super()._expected(w, message)

    def _rec_of(self, tenure: PoolPilot) -> WorkerRec | None:
        return next((w for w in self.workers if w.pilot is tenure), None)

    # -- the supervisor's passes ------------------------------------------------------------

    def _claim_expired(self, owner: str | None = None) -> list[tuple[Lease, RunTask]]:
        """The main supervisor's pass, under its own token (``owner``, an orphan sweep's,
        never comes here: pool mode skips that event)."""
        assert owner is None, "pool mode claims only under its supervisors' own tokens"
        return self._pass("main")

    def _pass(self, name: str) -> list[tuple[Lease, RunTask]]:
        """One pass of supervisor ``name``: the leases it claimed and handed out, in order."""
        s = self.world.supervised(name)
        before = {row["id"]: row for row in sqlfile.rows(self.conn, "leases")}
        watched = self._before_pass(s)
        procs = self.world.sweep(s)
        killed = self._after_pass(s, watched)  # a stuck worker's run goes at once
        claimed: list[tuple[Lease, RunTask]] = []
        for proc in procs:
            lease = proc.lease
            assert lease is not None
            prior = before.get(lease.run_id)
            if prior is None or pid_of(prior["owner"]) not in killed:
                self._check_live_claim(lease, prior)
            self.known[lease.run_id] = (lease.owner, lease.generation)
            self._handing[lease.run_id] = (s, proc)
            claimed.append((lease, RunTask(agent=self._agent_of(lease.run_id) or "", input=None)))
        # a run it gave up is failed for good (pool_states' gave_up judges when)
        self.failed_for_good |= {row["id"] for row in sqlfile.rows(self.conn, "given_up")}
        for tenure in self.world.died:  # the pass freed a dead worker's lease for it
            dead = self._rec_of(tenure)
            if dead is not None:
                self.moved.add(dead.label)
        self._check_freed()
        self._check_idle_wait(s)
        self.last = self.unchanged = None
        return claimed

    def _hand_out(self, claimed: list[tuple[Lease, RunTask]]) -> str:
        """A worker for each claimed run, driven to its first gate (as ``sweep`` does)."""
        results = []
        for lease, task in claimed:
            old = self.active.get(lease.run_id)
            if old is not None:  # its lease ran out (the claim was checked): outpaced
                self._wait(old, frozen=False)
            self.stats.restarts += 1
            start = self._start(lease.run_id, lease=lease, task=task)
            results.append(f"{lease.run_id}: " + self._launch(start))
        return "; ".join(results) if results else "nothing"

    def apply(self, event: Event) -> str:
        result = super().apply(event)
        for _ in range(MAX_PASSES):
            due = [s for s in self.world.due if s in self.world.supervisors.values()]
            self.world.due.clear()
            if not due:
                break
            for s in due:
                claimed = self._pass(s.name)
                if claimed:
                    extra = f"; the {s.name} supervisor hands on {self._hand_out(claimed)}"
                    self.trace[-1] += extra
                    result += extra
        self.world.collect_orphans()
        return result

    # -- events -----------------------------------------------------------------------------

    def _on_start(self, e: Event) -> str:
        run = e.run_name
        if run in self.started:
            return "skipped (already started)"
        self.started.append(run)
        self.kinds[run] = e.kind
        self.active[run] = None
        self.waiting[run] = []
        Journal(self.conn).create_run(run, self._agent_names[e.kind], None)
        claimed = self._pass("main")
        handed = self._hand_out(claimed)
        if [lease.run_id for lease, _ in claimed] == [run]:
            return handed.removeprefix(f"{run}: ")  # as a worker of its own would have
        return f"created; claimed {handed}"

    def _on_tick(self, e: Event) -> str:
        result = super()._on_tick(e)
        claimed = self._pass("main")
        return result + (f"; claimed {self._hand_out(claimed)}" if claimed else "")

    def _on_configure(self, e: Event) -> str:
        return "skipped (pool mode: the supervisor's long-lived workers keep their settings)"

    def _on_orphan_sweep(self, e: Event) -> str:
        return "skipped (pool mode: a supervisor dies by hangup, its real SIGKILL)"

    def _on_rival_sweep(self, e: Event) -> str:
        beats = ""
        if e.seconds:  # the clock moves, and the rival polls before the main one does
            self._advance(e.seconds)
            beats = self._beat_all() + "; "
        claimed = self._pass("rival")
        self.stats.count("rival sweep")
        return f"{beats}the rival supervisor claimed {self._hand_out(claimed)}"

    def _on_sigterm(self, e: Event) -> str:
        w = self.active.get(e.run_name)
        if w is None or not isinstance(w.pilot, PoolPilot):
            return "skipped (no pool worker holds the run)"
        w.pilot.terminated = True
        self.moved.add(w.label)
        w.pilot.signal(signal.SIGTERM)
        self.stats.count("pool worker SIGTERM")
        return self._ended(w, self._exit_of(w))

    def _exit_of(self, w: WorkerRec) -> Exit:
        message = w.pilot.next()
        if not isinstance(message, Exit):
            raise RuntimeError(f"{w.label} went on to {message} after a signal that ends it")
        return message

    def _on_stop_supervisor(self, e: Event) -> str:
        if "main" not in self.world.supervisors:
            return "skipped (no supervisor runs)"
        stopped = self.world.stop("main")
        ended = []
        for tenure in stopped:
            w = self._rec_of(tenure)
            if w is not None and w.alive:
                self.moved.add(w.label)
                assert tenure.exit is not None
                tenure.ended = True
                ended.append(self._ended(w, tenure.exit))
        self.world.died.extend(stopped)
        self._check_freed()
        self.stats.count("supervisor SIGTERM")
        return "the supervisor stopped" + (": " + ", ".join(ended) if ended else "")

    def _on_hangup(self, e: Event) -> str:
        if "main" not in self.world.supervisors:
            return "skipped (no supervisor runs)"
        orphans = self.world.hang_up("main")
        self.stats.count("supervisor hang-up")
        labels = [w.label for t in orphans if (w := self._rec_of(t)) is not None and w.alive]
        return "the supervisor died" + (f"; orphans {', '.join(labels)}" if labels else "")

    def _on_db_crash(self, e: Event) -> str:
        result = super()._on_db_crash(e)
        if not result.startswith("skipped"):
            self.world.database_crashed()
        return result

    def _on_crash(self, e: Event) -> str:
        w = self.active.get(e.run_name)
        result = super()._on_crash(e)
        if w is not None and isinstance(w.pilot, PoolPilot) and w.crashed_by_us:
            self.stats.count("pool worker killed" if e.kill else "pool worker crashed")
        return result

    def _on_stall(self, e: Event) -> str:
        w = self.active.get(e.run_name)
        result = super()._on_stall(e)
        if w is not None and isinstance(w.pilot, PoolPilot) and w.frozen:
            self.stats.count("pool worker stalled")
        return result

    # -- the pool's invariants --------------------------------------------------------------

    def check(self) -> None:
        self.problems += self.world.problems
        self.world.problems.clear()
        self._check_one_run()
        super().check()
