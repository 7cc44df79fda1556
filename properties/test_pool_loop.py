"""The Supervisor's own loop and timers (:mod:`properties.pool_loop`): ``serve()`` and
``drain()`` on a thread against real runs, the watchdog's and the unserved look's timers
under a frozen ``time.monotonic``. The real supervisor keeps every check; each check
fails on a supervisor with the slip planted (the mutants of gap class 20)."""

from __future__ import annotations

import select
from signal import SIGTERM

import pytest

from agent_runtime.store import db
from agent_runtime.store.journal import Journal
from agent_runtime.supervisor import supervision
from agent_runtime.supervisor.supervision import Supervisor
from agent_runtime.supervisor.unserved import UnservedWatch
from agent_runtime.supervisor.workerpool import WorkerProcess

from .pool_loop import drain_problems, timer_problems
from .pool_runner import PoolRunner
from .pool_serve import loop_problems, serve_problems
from .violations import text_of_kind


def test_the_real_supervisors_loop_serves_drains_and_keeps_its_timers(
    bare_pool: PoolRunner,
) -> None:
    assert loop_problems(bare_pool) == []


class _QuitsWhenIdle(Supervisor):
    """Stops serving at its first pass with no busy worker (``once or not busy``)."""

    def sweep(self) -> list[WorkerProcess]:
        started = super().sweep()
        if not self.busy:
            self.stopping = True
        return started


def test_a_supervisor_that_stops_serving_when_idle_is_caught(planted: PoolRunner) -> None:
    planted.world.supervisor_class = _QuitsWhenIdle
    assert "before any stop" in text_of_kind(serve_problems(planted), "pool_serve")


class _Undrained(Supervisor):
    """Its wait never drains the wake-up pipe (``_wait``'s ``not in``, e99642ce)."""

    def _wait(self, timeout: float) -> None:
        select.select([self._wake_r], [], [], timeout)


def test_a_supervisor_that_never_drains_its_wake_byte_is_caught(planted: PoolRunner) -> None:
    planted.world.supervisor_class = _Undrained
    found = text_of_kind(serve_problems(planted), "pool_serve")
    assert "after a wake (a signal's byte on its wake-up pipe)" in found


class _Unreconnecting(Supervisor):
    """Its reconnect lets a database that is still away raise (488289ee)."""

    def _reconnect(self) -> None:
        self.conn.close()
        self.conn = db.connect(self.url, application_name="agent_runtime.supervisor")
        self.journal = Journal(self.conn)


def test_a_supervisor_that_dies_while_the_database_is_away_is_caught(
    planted: PoolRunner,
) -> None:
    planted.world.supervisor_class = _Unreconnecting
    found = text_of_kind(serve_problems(planted), "pool_serve")
    assert "while the database was down" in found


class _Hasty(Supervisor):
    """Its drain returns at its first pass that started nothing, busy workers or not."""

    def drain(self) -> None:
        while True:
            self.reap()
            if not self.sweep():
                return
            self.wait(self.settings.poll)


def test_a_drain_that_returns_while_workers_hold_runs_is_caught(planted: PoolRunner) -> None:
    planted.world.supervisor_class = _Hasty
    assert "while workers held" in text_of_kind(drain_problems(planted), "pool_drain")


class _Endless(Supervisor):
    """Its drain never returns (``if started and not self.busy``)."""

    def drain(self) -> None:
        while True:
            self.reap()
            self.sweep()
            self.wait(self.settings.poll)


def test_a_drain_that_never_returns_is_caught(planted: PoolRunner) -> None:
    planted.world.supervisor_class = _Endless
    assert "had not returned" in text_of_kind(drain_problems(planted), "pool_drain")


class _Slack(Supervisor):
    """Its watchdog checks once a poll instead of twice."""

    def watch(self) -> bool:
        before = self._next_watch
        killed = super().watch()
        if self._next_watch != before:
            self._next_watch += self.settings.poll / 2
        return killed


class _LooksOnce(UnservedWatch):
    """Looks for unserved runs once, never again."""

    def look(self, conn: db.Connection) -> list[str]:
        self._next = float("inf")
        return super().look(conn)


class _Forgetful(Supervisor):
    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.unserved = _LooksOnce(self.unserved.agents, self.unserved.poll)


@pytest.mark.parametrize(
    ("planted_class", "said"),
    [(_Slack, "the watchdog checked at [0.0, 3.0, 6.0]"), (_Forgetful, "it looked at [0.0]")],
)
def test_a_timer_that_fires_too_seldom_is_caught(
    planted: PoolRunner, planted_class: type[Supervisor], said: str
) -> None:
    planted.world.supervisor_class = planted_class
    assert said in text_of_kind(timer_problems(planted), "pool_timer")


class _Abrupt(Supervisor):
    """Sends its workers no SIGTERM at its stop: each is SIGKILLed after the grace."""

    def shutdown(self) -> None:
        for proc in self.workers.values():
            send = proc.signal
            proc.signal = lambda signum, send=send: None if signum == SIGTERM else send(signum)  # type: ignore[method-assign,misc]
        super().shutdown()


def test_a_serving_supervisor_that_kills_its_workers_at_its_stop_is_caught(
    planted: PoolRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(supervision, "STOP_GRACE", 0.2)  # the grace it waits for nothing
    planted.world.supervisor_class = _Abrupt
    found = text_of_kind(serve_problems(planted), "pool_stop")
    assert "of the stopping serve() supervisor was SIGKILLed" in found
