"""Workers the schedule runner drives gate by gate: a thread, or a real process.

Every crash point of the runtime is a *gate*: the worker reports ``(point, seq)``
and waits for one word back -- ``go`` (carry on) or ``crash`` (die right here).
While a worker waits at a gate nothing else of it runs, so the runner decides
every interleaving and a schedule replays the same way every time. While it waits,
the runner may also renew its lease through the worker's own heartbeat
(:meth:`Pilot.beat`): the production renewal, at a moment the schedule chose.

- :class:`~properties.thread_pilot.ThreadPilot` runs ``Worker.run`` in a thread against
  in-process mocks; ``crash`` raises :class:`~agent_runtime.crash.InjectedCrash` (a
  ``BaseException``, as in the runtime's own in-process tests).
- :class:`~properties.process_pilot.ProcessPilot` runs it in a real process.
"""

from __future__ import annotations

import logging
import os
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final, Literal, cast

import httpx

from agent_runtime.config import Settings
from agent_runtime.crash import CrashPlan
from agent_runtime.hostid import host_identity
from agent_runtime.loop.outcome import Outcome
from agent_runtime.loop.worker import Worker
from agent_runtime.store import db
from agent_runtime.store.records import Lease, RunTask

from . import handback, variants
from .agents import DEFAULT_KIND, suite_agents

Action = Literal["go", "crash", "kill"]
MESSAGE_TIMEOUT: Final = 60.0  # seconds a worker may take to reach its next gate
CRASHED: Final = "crashed"  # exit kind of a worker we killed at a gate
DONE: Final = "done"  # exit kind of a worker whose run() returned

log = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True)
class GatePlan(CrashPlan):
    """A crash plan that hands every point to ``hook`` instead of matching one."""

    hook: Callable[[str, int], None]

    def reached(self, point: str, seq: int) -> None:
        self.hook(point, seq)


@dataclass(frozen=True, kw_only=True)
class Gate:
    point: str
    seq: int


@dataclass(frozen=True, kw_only=True)
class Exit:
    kind: str  # DONE, CRASHED, or the exception's class name
    detail: str = ""


Message = Gate | Exit

# What the runner does at a gate while a drive lasts: its bookkeeping, then the word.
OnGate = Callable[[Gate], Literal["go", "pause", "crash", "kill"]]


@dataclass(frozen=True, kw_only=True)
class Stop:
    """Where one drive (:meth:`Pilot.drive`) left the worker.

    ``message`` is the worker's :class:`Exit`, or the gate it waits at; ``action`` what the
    runner's ``on_gate`` said there (``go``: the drive ran out of gates); ``error`` what
    ``on_gate`` raised there, if it raised."""

    message: Message
    action: str | None = None
    error: BaseException | None = None


@dataclass(frozen=True, kw_only=True)
class Start:
    """How a pilot's worker enters its run (the three ways the runtime has)."""

    run_id: str
    label: str  # w1, w2, ... in the order the schedule started them
    takeover: bool = False  # restart: take a live lease over (the caller says it is dead)
    lease: Lease | None = None  # supervisor: a lease claimed for this worker
    task: RunTask | None = None  # and the run's agent and input, as that claim read them
    kind: str = DEFAULT_KIND  # the run's agent (properties.agents), should it create it

    def to_json(self) -> dict[str, Any]:
        lease = self.lease
        return {
            "run_id": self.run_id,
            "label": self.label,
            "takeover": self.takeover,
            "kind": self.kind,
            "lease": None
            if lease is None
            else {"run_id": lease.run_id, "owner": lease.owner, "generation": lease.generation},
            "task": None
            if self.task is None
            else {"agent": self.task.agent, "input": self.task.input},
        }

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> Start:
        lease = obj.get("lease")
        return cls(
            run_id=obj["run_id"],
            label=obj["label"],
            takeover=bool(obj["takeover"]),
            lease=None if lease is None else Lease(**lease),
            task=RunTask(**obj["task"]) if obj.get("task") else None,
            kind=obj.get("kind", DEFAULT_KIND),
        )


HANDED: Final = ("support", "once")  # kinds whose workers take the API's other ways (enter)


# Run r2's workers run on other hosts: their tokens name them, so no claimer here can prove
# them dead by their pid (``lease.owner_is_dead``); their leases have to run out, or be
# taken over by force. The suite's other workers share this host, as the supervisor does.
# Two hosts, by the worker's number: an odd one's sorts before any host name here (``!``,
# the first printable character a name may hold), an even one's after it (``~``, the
# last): a claimer that compares host names by order instead of equality meets both.
ELSEWHERE: Final = "elsewhere"
ELSEWHERE_HOSTS: Final = (f"~{ELSEWHERE}", f"!{ELSEWHERE}")  # even, odd worker number
FOREIGN_RUN: Final = "r2"
# Run r1's in-process workers are threads of the claimer's own process, as an application
# that runs several workers in threads has them (properties.thread_body): their tokens name
# the suite's pid, which proves nothing of a thread; a dead one's lease has to run out or
# be taken by force, and the operator's list must never call its owner gone.
SIBLING_RUN: Final = "r1"


def host_of(run_id: str | None, label: str = "") -> str:
    """The host a worker of ``run_id`` (labelled ``label``, ``w<number>``) runs on, as its
    owner token names it."""
    if run_id != FOREIGN_RUN:
        return host_identity()
    number = label.lstrip("w")
    return ELSEWHERE_HOSTS[int(number) % 2 if number.isdigit() else 1]


def on_another_host(owner: str | None) -> bool:
    """Whether ``owner`` (a token) names a host other than this one."""
    return owner is not None and owner.split(":", 1)[0] != host_identity()


def owner_of(label: str, pid: int | None = None, run_id: str | None = None) -> str:
    """``host:pid:label``: the runtime's owner-token shape, with a readable nonce; the host
    is another for a worker of :data:`FOREIGN_RUN`."""
    return f"{host_of(run_id, label)}:{pid or os.getpid()}:{label}"


def build_worker(
    variant: variants.Variant,
    conn: db.Connection,
    settings: Settings,
    *,
    owner: str,
    hook: Callable[[str, int], None],
    support_url: str,
    transports: dict[str, httpx.BaseTransport] | None = None,
    sleep: Callable[[float], None] = time.sleep,
    heartbeat_connect: Callable[[], db.Connection],
    start: Start | None = None,
) -> Worker:
    """A worker of the variant's kind for ``start`` (None: with every agent of the suite;
    ``transports``: the in-process remotes by name; none: the URLs in ``settings`` and
    ``support_url``): with the run's agent alone, or none when :func:`enter` hands it over
    (:func:`handed`)."""
    agents = suite_agents(support_url)
    mine = list(agents.values())
    if start is not None:
        mine = [] if handed(start) else [agents[start.kind]]
    return variant.worker.build(
        variant.journal(conn),
        settings,
        agents=mine,
        transports=transports,
        sleep=sleep,
        crash=GatePlan(hook=hook),
        owner=owner,
        heartbeat_connect=heartbeat_connect,  # no thread: the runner says when it beats
        rand=no_jitter,  # every wait its full length: both runners see the same backoffs
    )


def no_jitter() -> float:
    """The jitter source of the suite's workers: none, so that schedules replay exactly."""
    return 0.0


@dataclass(frozen=True, kw_only=True)
class Beat:
    """What one renewal through the worker's own heartbeat did."""

    present: bool  # False: the worker holds no lease (no heartbeat) right now
    expires: datetime | None = None  # the lease's new expiry; None: the renewal failed
    lost: bool = False  # the heartbeat found the run taken over: the worker is fenced

    def to_json(self) -> dict[str, Any]:
        return {
            "present": self.present,
            "expires": None if self.expires is None else self.expires.isoformat(),
            "lost": self.lost,
        }

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> Beat:
        expires = obj.get("expires")
        return cls(
            present=bool(obj["present"]),
            expires=None if expires is None else datetime.fromisoformat(expires),
            lost=bool(obj["lost"]),
        )


def beat(worker: Worker) -> Beat:
    """Renew ``worker``'s lease once, through the runtime's own heartbeat."""
    heartbeat = worker.heartbeat
    if heartbeat is None:
        return Beat(present=False)
    expires = heartbeat.beat()
    return Beat(present=True, expires=expires, lost=heartbeat.lost.is_set())


def _nothing() -> None:
    return None


def handed(start: Start) -> bool:
    """Whether ``start``'s worker is handed its agent as it enters (``Worker.run(agent=
    Agent)``, a new agent joining the worker's): a start that may create its run, of the
    desk's kinds. The cloud's take their worker's only agent, named by nobody."""
    return start.lease is None and start.kind in HANDED


def enter(
    worker: Worker, start: Start, support_url: str, *, returned: Callable[[], None] = _nothing
) -> Outcome:
    """Drive the run; what ``run`` hands back is judged here (:mod:`.handback`), after
    ``returned`` is told that it returned."""
    agent = suite_agents(support_url)[start.kind]
    outcome = handback.received(
        lambda: worker.run(
            start.run_id,
            # handed over, or the default of a worker of one agent (a new run names none)
            agent=agent
            if handed(start)
            else None
            if list(worker.agents) == [agent.name]
            else agent.name,
            lease=start.lease,
            create=start.lease is None,
            takeover=start.takeover,
            # a run claimed for a desk kind's worker: it reads the run itself (the API's None)
            task=None if start.kind in HANDED else start.task,
        ),
        worker.journal,
        start.run_id,
        returned=returned,
    )
    return cast(Outcome, outcome)


class Pilot(ABC):
    """One worker, paused at a gate whenever the runner is not letting it go."""

    start: Start
    owner: str
    backend_pid: int | None

    @abstractmethod
    def next(self, timeout: float = MESSAGE_TIMEOUT) -> Message:
        """Block until the worker reaches a gate or ends."""

    @abstractmethod
    def reply(self, action: Action) -> None:
        """Answer the gate the worker waits at."""

    def drive(self, on_gate: OnGate, gates: int, *, resume: bool) -> Stop:
        """Let the worker run (``resume``: answer ``go`` at the gate it waits at) while
        ``on_gate`` says ``go``, for at most ``gates`` gates; where it stopped.

        Here, one message per gate in the caller's thread; a pilot may run ``on_gate`` in the
        worker's own thread instead (the caller waits meanwhile, so it is the same order)."""
        if resume:
            self.reply("go")
        for passed in range(1, gates + 1):
            message = self.next()
            if isinstance(message, Exit):
                return Stop(message=message)
            action = on_gate(message)
            if action != "go" or passed == gates:
                return Stop(message=message, action=action)
            self.reply("go")
        raise ValueError(f"a drive needs at least one gate, not {gates}")

    @abstractmethod
    def beat(self) -> Beat:
        """While the worker waits at a gate: renew its lease once, as its heartbeat would."""

    def freeze(self) -> None:  # noqa: B027 -- a no-op unless the worker is a process
        """Stop the worker's whole process (a stall); no-op where that means nothing."""

    def thaw(self) -> None:  # noqa: B027
        """Undo :meth:`freeze`."""

    @abstractmethod
    def abandon(self) -> None:
        """Make sure the worker is gone (cleanup); safe to call twice."""

    @property
    def gone(self) -> bool:
        """Whether the process its owner token names is provably gone (False: alive, or
        not known here)."""
        return False

    @property
    def leaked(self) -> str:
        """What the worker, once ended, left open that it should have closed ("": nothing,
        or not known here: a process's connections die with it)."""
        return ""
