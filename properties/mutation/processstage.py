"""The killing command's process stage: the small scope's death stories with real worker
processes, for the modules that prove an owner dead by its pid.

The in-process runner claims every run in the suite's own process, and each in-process
worker's token names a process the suite started after itself: the claimer's pid is
always the lowest of all. So ``lease.owner_is_dead`` could compare a dead owner's pid to
its own by order (``pid < os.getpid()`` for ``pid == os.getpid()``: "that is me, alive")
and no in-process schedule would see it (the 2026-12-06 run: b6a86349, 783af8eb
survived). With processes, the worker a restart starts is younger than the one it takes
the run from, as a restarted supervisor is in production: a claim that calls that owner
alive records ``forced`` for a process that provably died, and ``claim_truth`` says so.

Run after the in-process stages passed, for the driver's ``PROCESS_MODULES`` only (a few seconds
per mutant). Not shrunk; the first failure is the verdict.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Final

from ..agents import KINDS
from ..events import Event
from ..minimise import first_failure
from ..runners import ProcessRunner
from ..scope import story
from ..server import SuiteDatabase

# A worker crashed (its process exits) or killed (SIGKILL, reaped or a zombie) after its
# intent, restarted at once: the restart's claim must prove it dead. Then another host's
# workers, killed twice: never proved dead here.
STORIES: Final = (
    story(KINDS[0], "crash", "after_intent", 0),
    (
        Event(op="start", run=0, agent=KINDS[0]),
        Event(op="crash", run=0, point="after_confirm", seq=0, kill=True),
        Event(op="restart", run=0),
        Event(op="sweep"),
    ),
    story(KINDS[0], "elsewhere", "", 0),
    # a live owner, outpaced by a restart: probing it must not hurt it (a probe that sent a
    # real signal, kill(pid, 1) for kill(pid, 0), hung it up: 5aba7327, 2026-12-06)
    story(KINDS[0], "outpaced", "after_intent", 0),
)


@dataclass
class ProcessVerdict:
    error: AssertionError | None
    stage: str
    failing: list[Event]
    seconds: float


def process_stage(database: SuiteDatabase) -> ProcessVerdict:
    """Replay :data:`STORIES` with real worker processes; the first failure, or none."""
    began = time.monotonic()
    runner = ProcessRunner(database.url, server=database)
    try:
        runner.warm()
        for number, events in enumerate(STORIES, 1):
            error = first_failure(runner, events)
            if error is not None:
                stage = f"process stage, schedule {number}"
                return ProcessVerdict(error, stage, list(events), time.monotonic() - began)
    finally:
        runner.close()
    done = f"process stage, {len(STORIES)} schedules"
    return ProcessVerdict(None, done, [], time.monotonic() - began)
