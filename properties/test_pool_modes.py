"""The supervisor's spawn modes, its pool kept whole, and its stop of stalled workers
(:mod:`properties.pool_modes`, :mod:`properties.pool_kept`, :mod:`properties.pool_open`,
:mod:`properties.pool_stall`):
the real supervisor keeps every check, and each check fails on a supervisor with the slip
planted."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Final

import pytest

from agent_runtime.store.records import Lease, RunTask
from agent_runtime.supervisor import supervision, takeback, workerpool
from agent_runtime.supervisor.supervision import Supervisor
from agent_runtime.supervisor.workerpool import WorkerProcess

from .planting import plant_python
from .pool_bug import bug_problems, unheld_problems
from .pool_kept import kept_problems
from .pool_modes import mode_problems, spawn_problems
from .pool_open import open_problems
from .pool_runner import PoolRunner
from .pool_size import size_problems
from .pool_stall import stall_problems
from .violations import Violation, text_of_kind


def test_the_real_supervisor_keeps_its_modes_its_pool_and_its_stop(
    bare_pool: PoolRunner,
) -> None:
    assert mode_problems(bare_pool) == []
    assert kept_problems(bare_pool) == []
    assert open_problems(bare_pool) == []
    assert stall_problems(bare_pool) == []
    assert bug_problems(bare_pool) == []
    assert unheld_problems(bare_pool) == []
    assert size_problems(bare_pool) == []


class _Impatient(Supervisor):
    """Stops without a grace: every worker still there after its SIGTERM is SIGKILLed."""

    def shutdown(self) -> None:
        grace = supervision.STOP_GRACE
        supervision.STOP_GRACE = 0.0
        try:
            super().shutdown()
        finally:
            supervision.STOP_GRACE = grace


def test_a_stop_that_kills_stalled_workers_before_the_grace_is_caught(planted: PoolRunner) -> None:
    planted.world.supervisor_class = _Impatient
    assert "SIGKILLs at [0.0, 0.0]s" in text_of_kind(stall_problems(planted), "pool_grace")


class _Unreplacing(Supervisor):
    """Owes no replacement for a pool worker that died idle."""

    def reap(self) -> list[tuple[Lease, int]]:
        busy = {w.pid for w in self.busy}
        gone = [pid for pid, w in self.workers.items() if pid not in busy]
        ended = super().reap()
        if any(pid not in self.workers for pid in gone):
            self._owed = 0
        return ended


class _SpareAgain(Supervisor):
    """Tries a spare again at once after one died before it opened."""

    def _keep_spare(self) -> None:
        self._spare_failed = False
        super()._keep_spare()


@pytest.mark.parametrize(
    ("planted_class", "said"),
    [
        (_Unreplacing, "the pool keeps its size"),
        (_SpareAgain, "no other spare is tried"),
    ],
)
def test_a_pool_not_kept_whole_is_caught(
    planted: PoolRunner, planted_class: type[Supervisor], said: str
) -> None:
    planted.world.supervisor_class = planted_class
    assert said in text_of_kind(kept_problems(planted), "pool_kept")


class _PoolAnyway(Supervisor):
    """Hands a run to a pool worker whatever its spawn mode."""

    def _start(self, lease: Lease, task: RunTask) -> WorkerProcess:
        mode, self.spawn = self.spawn, "pool"
        try:
            return super()._start(lease, task)
        finally:
            self.spawn = mode


def test_a_fork_supervisor_that_starts_pool_workers_is_caught(planted: PoolRunner) -> None:
    planted.world.supervisor_class = _PoolAnyway
    assert "(pipe, exit" in text_of_kind(spawn_problems(planted, "fork"), "pool_spawn")


def test_a_reap_that_lets_a_database_error_through_is_caught(
    planted: PoolRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    """reap's handler (62e773e6): the worker's death while the database is away raised out
    of the supervisor's reap instead of being said."""
    handler = "except DatabaseError as exc:  # the lease will run out by itself"
    made = plant_python(monkeypatch, supervision, handler, handler.replace("Database", "Key"))
    planted.world.supervisor_class = made.Supervisor
    said = "while the database was down, and the supervisor's reap raised [DatabaseError("
    assert said in text_of_kind(kept_problems(planted), "pool_kept")


REPORTED = "if not exc.reported:"  # run_leased's, before its one log line
SAYS = '            log.error("%s run=%s error=%r"'
UNEXPECTED = "    except Exception as exc:  # a bug before the run was held"
DIED = "died = code == EXIT_CRASHED or code < "
ROOM = "len(self.workers) < self.settings.max_workers"
EARLY = "with a lease that ends at"
SIGNAL = "a death by any signal sends the run again at once, blaming nobody"
BUG = "a pool worker whose run met a bug"
UNHELD = "a pool worker whose adoption of unheld0 raised an error nobody expects"
Check = Callable[[PoolRunner], list[Violation]]


@dataclass(frozen=True)
class Slip:
    """One slip of a supervisor module's function (``name``, put in place on ``owner``,
    which calls it), the corner check that must catch it, and what that check says."""

    module: ModuleType
    old: str
    new: str
    owner: ModuleType | type
    name: str
    check: Check
    kind: str
    said: str


SLIPS: Final = {
    # takeback's 652b9d20: a death by SIGHUP (-1) taken for an exit with a code, backed off
    # and blamed on the worker
    "sighup": Slip(takeback, f"{DIED}0", f"{DIED}-1", supervision, "free_after_exit",
                   kept_problems, "pool_kept", SIGNAL),
    # takeback's 25a8efb4: a first death's run freed with a lease that ended a second before
    # (the next claim's audit row, and the operator, read that it ran out while its worker
    # still lived)
    "back_in_time": Slip(takeback, "if again else 0.0", "if again else -1.0", supervision,
                         "free_after_exit", kept_problems, "pool_kept", EARLY),
    # run_leased's d2c3f937 (it takes another run after a bug) and 7edf4535 (it says a
    # reported error again): the pool worker is a fork of this process, so it runs the slip
    "bug_fit": Slip(workerpool, "not unfit and connection_fit(worker)",
                    "not unfit or connection_fit(worker)", workerpool, "run_leased",
                    bug_problems, "pool_bug", BUG),
    "bug_reported": Slip(workerpool, f"{REPORTED}\n{SAYS}", f"if exc.reported:\n{SAYS}",
                         workerpool, "run_leased", bug_problems, "pool_bug", BUG),
    # run_leased's fd5865e5 (the error leaves run_leased) and 53f8ac42 (the worker takes
    # another run after it)
    "unheld_handler": Slip(workerpool, UNEXPECTED, UNEXPECTED.replace("Exception", "KeyError"),
                           workerpool, "run_leased", unheld_problems, "pool_bug", UNHELD),
    "unheld_fit": Slip(workerpool, "        return EXIT_SOFTWARE, False",
                       "        return EXIT_SOFTWARE, True", workerpool, "run_leased",
                       unheld_problems, "pool_bug", UNHELD),
    # supervision._room's c4892931: ``<`` written ``is not``, alike up to 256 workers
    "room": Slip(supervision, ROOM, ROOM.replace("<", "is not"), Supervisor, "_room",
                 size_problems, "pool_room", "with 257 busy workers started a spare (1 more)"),
}  # fmt: skip


@pytest.mark.parametrize("slip", list(SLIPS.values()), ids=list(SLIPS))
def test_a_slip_of_a_supervisor_function_is_caught(
    planted: PoolRunner, monkeypatch: pytest.MonkeyPatch, slip: Slip
) -> None:
    made = plant_python(monkeypatch, slip.module, slip.old, slip.new)
    owner = made if isinstance(slip.owner, ModuleType) else getattr(made, slip.owner.__name__)
    monkeypatch.setattr(slip.owner, slip.name, getattr(owner, slip.name))
    assert slip.said in text_of_kind(slip.check(planted), slip.kind)
