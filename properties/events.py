"""A schedule is data: a list of events, each a small JSON object.

=================  ==============================================  ==========================
op                 what happens                                    fields
=================  ==============================================  ==========================
``start``          create run ``r<run>`` of agent ``agent`` (one of  run, agent?
                   ``properties.agents.KINDS``; the seed's agent
                   if none) and start a worker; it claims the
                   lease and pauses at its first gate
``step``           the run's worker finishes one step (pauses at   run
                   its next ``after_confirm``) or the run
``crash``          the run's worker dies the next time it reaches  run, point, seq?, kill?
                   ``point`` (at step ``seq`` if given)
``pause``          the run's worker goes on to ``point`` and waits   run, point, seq?
                   there (alive: it still renews its lease)
``stall``          the run's worker freezes at ``point``: it stops  run, point, seq?
                   renewing its lease (it stays alive: a zombie
                   once its lease runs out and the run is taken)
``thaw``           the run's oldest stalled worker wakes where it  run
                   stands: it beats again, its work still waits
``resume``         the run's oldest frozen or outpaced worker      run
                   comes back (finishes its step, or is fenced)
``restart``        a new worker takes the run over (in-process:    run
                   ``takeover=True``); the old one, if alive, is an
                   outpaced zombie from now on (it still beats)
``tick``           the clock moves ``seconds``; every live worker   seconds
                   that is not frozen renews its lease through the
                   runtime's own heartbeat (a zombie's renewal
                   fails and marks it fenced)
``heartbeat``      the run's live, unfrozen workers renew now      run
``sweep``          a ``tick`` of ``seconds`` (default: one lease     seconds?
                   and a second), then the supervisor claims every
                   expired run and starts a worker on it
``cloud_fault``    arm a knob of the mock cloud: ``fail_before``    fault, n | seconds
                   (500, nothing done), ``drop_after`` (act, lose
                   the answer), ``latency`` (seconds, 0 clears;
                   longer than the tool timeout: the client gives
                   up while the remote acts)
``cloud_fault``    ``hold_next``: the next ``n`` requests that act     fault, n
                   at either remote are received and answered 504
                   ``held``: they act only at a ``land``, or
                   never once the clock passed their in-flight bound
``cloud_fault``    ``fail_lookups``: the desk's next ``n`` order       fault, n
                   lookups answer 500 (a ``read`` tool's outage)
``land``           the oldest held request acts now, after its     (none)
                   sender gave up, retried, checked or died; nobody
                   hears its answer
``model_fault``    the next ``n`` model answers are unusable:       fault, n
                   ``malformed``, ``unknown_tool``, ``invalid_args``
``drop_connection``  ``pg_terminate_backend`` of the run's worker's   run
                   database connection (the active one, else the
                   newest stalled one)
``db_crash``       PostgreSQL stops hard (``-m immediate``) and     run?, point?, seq?
                   comes back; with ``point``, first the run's
                   worker is driven to that gate. Every connection
                   drops; what was not flushed is lost
``resolve``        an operator resolves the run's call in doubt     run, choice?
                   (it needs attention): without ``choice``, once
                   no worker of it is alive, ``--confirm`` with what
                   the desk delivered, or ``--redo`` if it delivered
                   nothing; with ``choice`` (``confirm``, ``redo``,
                   ``fail``) that one, even while a zombie of the
                   run waits at a gate, where the desk allows it
``cancel``         an operator cancels the run (``cancel_run``),     run
                   wherever its workers stand; a refusal (done,
                   parked) is traced
``retry``          an operator retries the run (``retry_run``); a    run
                   refusal (done, cancelled, a live lease) is traced
``sigterm``        SIGTERM to the pool worker holding the run      run
                   (pool mode, ``properties.pool_runner``)
``hangup``         the supervisor dies (SIGKILL): every pipe to
                   its pool workers closes; they become orphans
                   (pool mode)
``stop_supervisor``  SIGTERM to the supervisor: it stops its
                   workers and hands their runs back (pool mode)
``rival_sweep``    a second supervisor on the same database      seconds?
                   sweeps (pool mode); with ``seconds``, the
                   clock moves that much first (as a ``tick``)
                   and the rival polls before the main one does
``configure``      workers started from now on run with          setting, n
                   ``setting`` (one of ``TUNABLE``: the client's
                   retries of a failed request, the bad answers a
                   run shows its model before it fails, the model
                   protocol: ``n`` 0 the agent's own, 1 Chat
                   Completions) set to ``n``, as an operator's
                   deployment may set them; workers already
                   running keep theirs
``orphan_sweep``   a supervisor claims every expired run, then   seconds?
                   dies before it hands any out: its claims name
                   a pid that is gone (a ``tick`` of ``seconds``
                   first, as ``sweep``)
``race``           the run's worker goes on into its next write    run
                   of a call and is held inside the statement,
                   past its fence read, while a restart claims
                   the run; then the write ends (a write that lands
                   after the claim committed is an
                   ``overtaken_write``); with no such write before
                   its next gate, it pauses there (in-process only:
                   ``properties.race``)
``race_claim``     a restart's claim of the run is held inside     run
                   its statement, after its update of the run
                   row, while the runner takes the run over too
                   (a new worker adopts it if it wins); then the
                   first commits (two claims that both took the
                   run from one owner: ``double_claim``); with
                   ``seconds``, the clock moves that much first   seconds?
                   (nobody beats) and the runner's claim is the
                   supervisor's sweep
=================  ==============================================  ==========================

``crash``, ``pause`` and ``stall`` also take the point ``retry_wait``: a worker's wait
before a retry (a tool's backoff between two attempts, or its client's wait before it sends
again), where nothing of the worker runs until the schedule lets it go on.

``sigterm``, ``hangup``, ``stop_supervisor``, ``rival_sweep`` apply only where a real
supervisor runs (``--mode pool``). An event that does not apply when it comes (a step of
a run nobody works on) is a no-op and says so in the trace: every list is a schedule.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Final

from agent_runtime.crash import CRASH_POINTS

from .agents import DEFAULT_KIND, KINDS
from .waits import WAIT_POINT

FORMAT: Final = "crashresume.schedule/6"
# /1 had no tick, heartbeat, db_crash; /2 no agent (every run the seed's) and no resolve;
# /3 no cancel, no retry, no resolve choice; /4 no configure; /5 no thaw
READABLE: Final = (FORMAT, *(f"crashresume.schedule/{n}" for n in (5, 4, 3, 2, 1)))
RUNS: Final = 3  # runs a schedule may interleave: r0, r1, r2
OPS: Final = (
    "start",
    "step",
    "crash",
    "pause",
    "stall",
    "resume",
    "restart",
    "sweep",
    "cloud_fault",
    "model_fault",
    "drop_connection",
    "tick",
    "heartbeat",
    "db_crash",
    "resolve",
    "land",
    "cancel",
    "retry",
    "sigterm",  # the pool mode's (properties.pool_runner); other runners skip these four
    "hangup",
    "stop_supervisor",
    "rival_sweep",
    "configure",
    "orphan_sweep",
    "race",  # the small scope's race stories place it; the machine does not draw it
    "race_claim",  # as race
    "thaw",  # as race
)
CLOUD_FAULTS: Final = ("fail_before", "drop_after", "latency", "hold_next")
DESK_FAULTS: Final = ("fail_lookups",)  # the desk's own knob: the scope's stories arm it
MODEL_FAULTS: Final = ("malformed", "unknown_tool", "invalid_args")
RESOLVE_CHOICES: Final = ("confirm", "redo", "fail")  # resolve RUN --seq N --<choice>
_RUN_OPS: Final = frozenset(OPS) - {
    "sweep", "cloud_fault", "model_fault", "tick", "db_crash", "land", "configure",
    "orphan_sweep",
}  # fmt: skip
# where a worker can be paused, crashed or stalled: the runtime's crash points, and a retry
# wait (properties.waits: a tool's backoff, or its client's wait before a re-send)
GATES: Final = (*CRASH_POINTS, WAIT_POINT)
# the settings a configure event may change, each with the most it may set
TUNABLE: Final = {"tool_retries": 4, "max_bad_answers": 4, "model_protocol": 1}
# model_protocol's n: the agent's own (None), or Chat Completions, which the mock model
# answers with every agent's plan (its decide protocol knows the seed's plan alone: a chat
# agent switched to it would be a misconfiguration, not a deployment)
PROTOCOLS: Final = (None, "chat")
# what only the pool mode generates and does (properties.pool_runner)
POOL_OPS: Final = ("sigterm", "hangup", "stop_supervisor", "rival_sweep")
_NEEDS_RUN: Final = _RUN_OPS - {"hangup", "stop_supervisor", "rival_sweep"}  # the supervisor's
MAX_LATENCY: Final = 5.0  # seconds a latency knob may take
MAX_SECONDS: Final = 3600.0  # seconds one tick or sweep may move the clock


class ScheduleError(ValueError):
    """A schedule file or event that is not what this module writes."""


def run_id(index: int) -> str:
    return f"r{index}"


@dataclass(frozen=True, kw_only=True)
class Event:
    op: str
    run: int | None = None
    point: str | None = None
    seq: int | None = None
    kill: bool = False  # crash: SIGKILL the process instead of os._exit(1) (process runner)
    fault: str | None = None
    n: int | None = None
    seconds: float | None = None
    agent: str | None = None  # start: the kind of run (properties.agents.KINDS)
    choice: str | None = None  # resolve: the operator's choice (RESOLVE_CHOICES), or theirs
    setting: str | None = None  # configure: which setting (TUNABLE) is set to n

    def __post_init__(self) -> None:
        if self.op not in OPS:
            raise ScheduleError(f"unknown op {self.op!r}; one of {', '.join(OPS)}")
        if self.agent is not None and (self.op != "start" or self.agent not in KINDS):
            raise ScheduleError(
                f"agent belongs to a start and is one of {', '.join(KINDS)}, got {self.agent!r}"
            )
        if self.op in _NEEDS_RUN and (self.run is None or not 0 <= self.run < RUNS):
            raise ScheduleError(f"{self.op} needs run in 0..{RUNS - 1}, got {self.run!r}")
        if self.op in ("crash", "pause", "stall") and self.point not in GATES:
            raise ScheduleError(f"{self.op} needs point in {', '.join(GATES)}")
        if self.op == "db_crash" and self.point is not None:
            if self.point not in CRASH_POINTS:
                raise ScheduleError(f"db_crash point must be one of {', '.join(CRASH_POINTS)}")
            if self.run is None or not 0 <= self.run < RUNS:
                raise ScheduleError(f"db_crash at a point needs run in 0..{RUNS - 1}")
        if self.choice is not None and (self.op != "resolve" or self.choice not in RESOLVE_CHOICES):
            raise ScheduleError(f"choice belongs to a resolve and is one of {RESOLVE_CHOICES}")
        if self.op == "tick" and (self.seconds is None or not 0 < self.seconds <= MAX_SECONDS):
            raise ScheduleError(
                f"tick needs seconds in (0, {MAX_SECONDS:.0f}], got {self.seconds!r}"
            )
        timed = self.op in ("sweep", "rival_sweep", "orphan_sweep") and self.seconds is not None
        if timed and not 0 <= (self.seconds or 0.0) <= MAX_SECONDS:
            raise ScheduleError(f"{self.op} seconds must be in [0, {MAX_SECONDS:.0f}]")
        if self.op == "race_claim" and self.seconds is not None and not 0 < self.seconds <= 3600:
            raise ScheduleError("race_claim seconds (then the sweep claims) must be in (0, 3600]")
        if self.seq is not None and self.seq < 0:
            raise ScheduleError(f"seq must be >= 0, got {self.seq}")
        if self.op == "cloud_fault" and self.fault not in (*CLOUD_FAULTS, *DESK_FAULTS):
            raise ScheduleError(
                f"cloud_fault needs fault in {', '.join((*CLOUD_FAULTS, *DESK_FAULTS))}"
            )
        if self.op == "model_fault" and self.fault not in MODEL_FAULTS:
            raise ScheduleError(f"model_fault needs fault in {', '.join(MODEL_FAULTS)}")
        if (self.setting is not None or self.op == "configure") and (
            self.op != "configure"
            or self.setting not in TUNABLE
            or self.n is None
            or not 0 <= self.n <= TUNABLE[self.setting]
        ):
            raise ScheduleError(
                "configure needs setting in "
                + ", ".join(f"{k} (n in 0..{v})" for k, v in TUNABLE.items())
                + f", got {self.setting!r} n={self.n!r}"
            )
        counted = self.op in ("cloud_fault", "model_fault") and self.fault != "latency"
        if counted and (self.n is None or self.n < 1):
            raise ScheduleError(f"{self.op} {self.fault} needs n >= 1, got {self.n!r}")
        if self.fault == "latency" and (
            self.seconds is None or not 0 <= self.seconds <= MAX_LATENCY
        ):
            raise ScheduleError(
                f"latency needs seconds in [0, {MAX_LATENCY}], got {self.seconds!r}"
            )

    @property
    def run_name(self) -> str:
        assert self.run is not None
        return run_id(self.run)

    @property
    def kind(self) -> str:
        """The kind of run a start creates."""
        return self.agent or DEFAULT_KIND

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"op": self.op}
        for name in ("run", "point", "seq", "fault", "n", "seconds", "agent", "choice", "setting"):
            value = getattr(self, name)
            if value is not None:
                out[name] = value
        if self.kill:
            out["kill"] = True
        return out

    @classmethod
    def from_json(cls, obj: object) -> Event:
        if not isinstance(obj, Mapping) or "op" not in obj:
            raise ScheduleError(f"an event is an object with an 'op', got {obj!r}")
        extra = sorted(set(obj) - {f.name for f in fields(cls)})
        if extra:
            raise ScheduleError(f"unknown event field(s) {', '.join(extra)} in {dict(obj)!r}")
        return cls(**{str(k): v for k, v in obj.items()})

    def __str__(self) -> str:
        if self.op in ("crash", "pause", "stall"):
            at = f"{self.point}" + ("" if self.seq is None else f" seq={self.seq}")
            how = " (SIGKILL)" if self.kill else ""
            return f"{self.op} {self.run_name} at {at}{how}"
        if self.op == "cloud_fault" or self.op == "model_fault":
            amount = f"{self.seconds}s" if self.fault == "latency" else f"x{self.n}"
            return f"{self.op} {self.fault} {amount}"
        if self.op in ("sweep", "rival_sweep", "orphan_sweep"):
            return self.op + ("" if self.seconds is None else f" +{self.seconds}s")
        if self.op == "race_claim" and self.seconds is not None:
            return f"race_claim {self.run_name} +{self.seconds}s"
        if self.op == "tick":
            return f"tick +{self.seconds}s"
        if self.op == "db_crash":
            if self.point is None:
                return "db_crash"
            at = f"{self.point}" + ("" if self.seq is None else f" seq={self.seq}")
            return f"db_crash with {self.run_name} at {at}"
        if self.op == "configure" and self.setting == "model_protocol":
            return f"configure model_protocol={setting_value(self.setting, self.n) or 'own'}"
        if self.op == "configure":
            return f"configure {self.setting}={self.n}"
        if self.op == "resolve" and self.choice is not None:
            return f"resolve {self.run_name} --{self.choice}"
        if self.op == "start" and self.agent is not None:
            return f"start {self.run_name} ({self.agent})"
        if self.run is None:
            return self.op
        return f"{self.op} {self.run_name}"


@dataclass(frozen=True, kw_only=True)
class Schedule:
    """A schedule as saved and replayed; the metadata says where it came from."""

    events: tuple[Event, ...]
    name: str = "schedule"
    variant: str | None = None  # a deliberately broken runtime (properties.variants)
    seed: int | None = None
    profile: str | None = None
    failure: str | None = None
    meta: Mapping[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "name": self.name,
            "variant": self.variant,
            "seed": self.seed,
            "profile": self.profile,
            "failure": self.failure,
            "length": len(self.events),
            "events": [e.to_json() for e in self.events],
            "meta": dict(self.meta),
        }

    @classmethod
    def from_json(cls, obj: object) -> Schedule:
        if isinstance(obj, list):  # a bare list of events is a schedule too
            return cls(events=tuple(Event.from_json(e) for e in obj))
        if not isinstance(obj, Mapping) or obj.get("format") not in READABLE:
            raise ScheduleError(f"not a {FORMAT} file (no matching 'format' field)")
        events = obj.get("events")
        if not isinstance(events, list):
            raise ScheduleError("'events' must be a list")
        return cls(
            events=tuple(Event.from_json(e) for e in events),
            name=str(obj.get("name") or "schedule"),
            variant=obj.get("variant"),
            seed=obj.get("seed"),
            profile=obj.get("profile"),
            failure=obj.get("failure"),
            meta=dict(obj.get("meta") or {}),
        )

    def save(self, path: str | os.PathLike[str]) -> Path:
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(self.to_json(), indent=2) + "\n", encoding="utf-8")
        tmp.replace(target)
        return target

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Schedule:
        try:
            obj = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ScheduleError(f"cannot read schedule {path}: {exc}") from exc
        return cls.from_json(obj)


def setting_value(setting: str | None, n: int | None) -> object:
    """What a configure event sets ``setting`` to: ``n``, or the protocol it numbers."""
    return PROTOCOLS[n or 0] if setting == "model_protocol" else n


def program(events: Sequence[Event]) -> str:
    """The schedule as numbered lines, for reports."""
    return "\n".join(f"{i:3d}. {e}" for i, e in enumerate(events, 1)) or "  (empty)"
