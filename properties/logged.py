"""What the in-process workers log, and the check that a resumed run says what it replayed.

The runtime's ``replayed run=R seq=N ...`` line (``Worker._drive``) tells an operator that
a worker acted on a decision an earlier owner journaled instead of asking the model again
(docs/04-operating-it.md; its text is tested in tests/test_log_lines.py). The in-process
runner's workers are threads of its own process, so :class:`WorkerLines` keeps the lines of
the worker's logger while the runner lives (not passed on to the root logger: the suite's
commands log nothing but violations).

**replayed** (teardown, in-process runner): a done run whose final decision was journaled
by an earlier generation than the one that finished it (``finish_run`` is fenced by the
finisher's generation, and nothing claims a done run) was finished by a worker that read
that decision back, so it logged ``replayed`` for that step. Without it a worker that never
logs the line (``_drive``'s generation test flipped to ``>``) passed the whole suite
(seed-43 sample, docs/mutation-report-2026-12-04-seed43.md).

**reported** (teardown, in-process runner): a worker that stopped with a runtime error
whose one ERROR line ``stop_on_error`` said (``stopped run=R ...`` or ``failed run=R ...``
with that error as its ``reason``) hands it on marked ``reported``, so that the process
edge (``cli.main``, the pool's ``run_leased``) does not say it a second time. Without it
``stop_on_error`` leaving the mark unset passed the suite (the same sample): the edges are
not in-process.
"""

from __future__ import annotations

import logging
import re
import threading
from typing import Final

from agent_runtime.errors import AgentRuntimeError
from agent_runtime.llm.conversation import DONE

from .observe import Snapshot
from .violations import Violation

LOGGERS: Final = ("agent_runtime.loop.worker", "agent_runtime.loop.stopping")
KEPT: Final = ("replayed ", "stopped run=", "failed run=")  # the lines the checks read
REPLAYED: Final = re.compile(r"replayed run=(?P<run>\S+) seq=(?P<seq>\d+) ")


class WorkerLines(logging.Handler):
    """The lines of :data:`LOGGERS` that start with one of :data:`KEPT`, while installed."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[str] = []
        self._guard = threading.Lock()
        self._loggers = [logging.getLogger(name) for name in LOGGERS]
        self._saved = [(logger.level, logger.propagate) for logger in self._loggers]

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if message.startswith(KEPT):
            with self._guard:
                self.lines.append(message)

    def install(self) -> WorkerLines:
        for logger in self._loggers:
            logger.setLevel(logging.INFO)
            logger.propagate = False
            logger.addHandler(self)
        return self

    def remove(self) -> None:
        for logger, (level, propagate) in zip(self._loggers, self._saved, strict=True):
            logger.removeHandler(self)
            logger.setLevel(level)
            logger.propagate = propagate

    def clear(self) -> None:
        with self._guard:
            self.lines.clear()

    def taken(self) -> list[str]:
        with self._guard:
            return list(self.lines)


def replayed_truth(now: Snapshot, lines: list[str]) -> list[Violation]:
    """**replayed**: see the module's doc."""
    found = _replayed_only_earlier(now, lines)
    for run, row in now.runs.items():
        if row.status != "done":
            continue
        finals = [d for d in now.decisions.get(run, {}).values() if d.tool == DONE]
        if not finals:
            continue
        final = max(finals, key=lambda d: d.seq)
        if final.generation >= row.generation:
            continue
        said = f"replayed run={run} seq={final.seq} "
        if not any(line.startswith(said) for line in lines):
            found.append(
                Violation(
                    "replayed",
                    run,
                    final.seq,
                    f"generation {row.generation} finished the run on the final decision "
                    f"generation {final.generation} journaled, yet logged no `{said.strip()}`",
                )
            )
    return found


def _replayed_only_earlier(now: Snapshot, lines: list[str]) -> list[Violation]:
    """The converse: a ``replayed`` line names a decision an earlier generation journaled,
    so never one of the run's last generation (which no later worker can have read back).
    Without it a worker that said it replayed its own answer's second call (``_drive``'s
    ``!=`` as ``<=``: 5a5b367f) passed the suite (2026-12-06)."""
    found: list[Violation] = []
    for line in lines:
        said = REPLAYED.match(line)
        if said is None:
            continue
        run, seq = said["run"], int(said["seq"])
        decision, row = now.decisions.get(run, {}).get(seq), now.runs.get(run)
        if decision is not None and row is not None and decision.generation >= row.generation:
            text = (
                f"a worker logged `replayed` for the decision generation {decision.generation} "
                f"journaled, the run's last: nobody later read it back (`{line:.100}`)"
            )
            found.append(Violation("replayed", run, seq, text))
    return found


def reported_truth(
    stopped: list[tuple[str, str, BaseException]], lines: list[str]
) -> list[Violation]:
    """**reported**: ``stopped`` is (worker label, run, what it raised) of every worker that
    raised (see the module's doc)."""
    found: list[Violation] = []
    for label, run, exc in stopped:
        if not isinstance(exc, AgentRuntimeError) or exc.reported:
            continue
        reason = f"reason={f'{type(exc).__name__}: {exc}'!r}"
        said = [
            line
            for line in lines
            if line.startswith((f"stopped run={run} ", f"failed run={run} ")) and reason in line
        ]
        if said:
            found.append(
                Violation(
                    "reported",
                    run,
                    None,
                    f"{label} stopped with {type(exc).__name__}, said in `{said[0]:.120}`, "
                    "yet not marked reported: the process edge would say it a second time",
                )
            )
    return found
