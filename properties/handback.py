"""What a worker hands back when ``Worker.run`` ends, judged where the pilot receives it.

- **outcome**: a run driven to done returns the public :class:`Outcome`: of this run,
  ``done`` as the journal says, its output the one the journal keeps -- immutable
  (``frozen``): a caller may keep it, hash it, hand it on, and nobody changes it after;
  and keyword-only, so no caller builds one from positional arguments that a new field
  would silently shift.
- **fencing_log**: a fenced worker (``LeaseLost`` out of ``holding``) says so in two
  logfmt WARNING lines of ``agent_runtime.loop.stopping`` -- ``fenced run=.. generation=..
  reason=..``, then ``lost-run run=.. mine=.. now_generation=.. now_status=.. now_owner=..``
  (who holds the run now) whenever the run still exists -- the lines an operator reads
  to learn why a worker stopped. Both are the worker thread's own, captured by a filter
  on that logger that passes on exactly what the logging configuration would have.

A slip raises :class:`HandedBack` in the pilot's thread (or process): the worker ends with
that kind, which no schedule explains, so the runner's ``worker`` check reports it.
"""

from __future__ import annotations

import dataclasses
import logging
import re
import threading
from collections.abc import Callable
from typing import Final

from agent_runtime.errors import AgentRuntimeError, LeaseLost
from agent_runtime.loop.outcome import Outcome
from agent_runtime.store.journal import Journal

STOPPING: Final = "agent_runtime.loop.stopping"
_PAIR: Final = re.compile(r"""(\w+)=('(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*"|\S+)""")
FENCED_KEYS: Final = ("run", "generation", "reason")
LOST_KEYS: Final = ("run", "mine", "now_generation", "now_status", "now_owner")


class HandedBack(Exception):
    """What ``Worker.run`` handed back is not what it promises (see the module)."""


class _Capture(logging.Filter):
    """Keeps each thread's WARNING lines of the stopping logger; passes a record on only
    if the logger's configuration without this capture would have.

    To hear WARNING lines where the configuration says less (a test's quiet ``caplog``),
    the capture may lower the logger's own level; it remembers the level it displaced and
    filters by that. A level someone else set since is theirs: the logger applied it
    already, and the capture passes on all it lets through."""

    def __init__(self) -> None:
        super().__init__()
        self.lines: dict[int, list[str]] = {}
        self.ours: int | None = None  # the level the capture set, while it still stands
        self.displaced = logging.NOTSET  # the level it replaced

    def filter(self, record: logging.LogRecord) -> bool:
        listening = self.lines.get(threading.get_ident())
        if listening is not None:  # a pilot's thread, inside Worker.run
            listening.append(record.getMessage())
        logger = logging.getLogger(STOPPING)
        if self.ours is None or logger.level != self.ours:
            return True  # the logger's own level, not the capture's, let it through
        if self.displaced != logging.NOTSET:
            return record.levelno >= self.displaced
        parent = logger.parent
        return parent is None or record.levelno >= parent.getEffectiveLevel()


_capture = _Capture()


def _listen() -> list[str]:
    """Start keeping this thread's stopping lines (afresh); the list they go to."""
    logger = logging.getLogger(STOPPING)
    if _capture not in logger.filters:
        logger.addFilter(_capture)
    if logger.level != _capture.ours:
        _capture.ours = None  # set by someone else since (or never by the capture)
    if _capture.ours is None and (logger.level == logging.NOTSET or logger.level > logging.WARNING):
        _capture.displaced = logger.level
        logger.setLevel(logging.WARNING)
        _capture.ours = logging.WARNING
    lines: list[str] = []
    _capture.lines[threading.get_ident()] = lines
    return lines


def logfmt(line: str) -> tuple[str, dict[str, str]]:
    """A logfmt line's event (its first word) and its ``key=value`` pairs; ValueError if
    anything else is in it."""
    event, _, rest = line.partition(" ")
    pairs = {m.group(1): m.group(2) for m in _PAIR.finditer(rest)}
    if _PAIR.sub("", rest).strip() or "=" in event:
        raise ValueError(f"not logfmt: {line!r}")
    return event, pairs


def received(
    run: Callable[[], object], journal: Journal, run_id: str, *, returned: Callable[[], None]
) -> object:
    """Call ``run`` (a ``Worker.run``), tell ``returned`` at once (the pilot's own checks
    of the moment it returned go first), judge what it handed back, and hand it on: its
    return value (judged an :class:`Outcome`), or its exception raised again."""
    lines = _listen()
    try:
        outcome = run()
    except LeaseLost:
        returned()
        judge_fencing(lines, journal, run_id)
        raise
    finally:
        _capture.lines.pop(threading.get_ident(), None)
    returned()
    judge_outcome(outcome, journal, run_id)
    return outcome


def judge_outcome(outcome: object, journal: Journal, run_id: str) -> None:
    if not isinstance(outcome, Outcome):
        raise HandedBack(f"run returned {type(outcome).__name__}, not an Outcome")
    try:
        setattr(outcome, "status", outcome.status)  # noqa: B010 -- the point is the setattr
    except dataclasses.FrozenInstanceError:
        pass
    else:
        raise HandedBack(f"the Outcome of {run_id} can be changed after it was returned")
    try:
        type(outcome)(*dataclasses.astuple(outcome))  # type: ignore[call-arg]
    except TypeError:
        pass  # keyword-only: positional arguments refused
    else:
        raise HandedBack(f"the Outcome of {run_id} can be made from positional arguments")
    row = journal.get_run(run_id)
    said = (outcome.run_id, outcome.status, outcome.output)
    kept = None if row is None else (row.id, row.status, row.output)
    if said != kept:
        raise HandedBack(f"the Outcome says (run, status, output) {said}, the journal {kept}")


def judge_fencing(lines: list[str], journal: Journal, run_id: str) -> None:
    """After a ``LeaseLost``: the ``fenced`` line, then ``lost-run`` if the run exists."""
    parsed = []
    for line in lines:
        try:
            parsed.append(logfmt(line))
        except ValueError as exc:
            raise HandedBack(f"fenced worker of {run_id}: {exc}") from None
    fenced = [p for e, p in parsed if e == "fenced" and p.get("run") == run_id]
    if not fenced:
        return  # fenced before holding the run (a claim refused): nothing to say yet
    missing = [k for k in FENCED_KEYS if k not in fenced[-1]]
    if missing:
        raise HandedBack(f"the fenced line of {run_id} lacks {missing}")
    lost = [p for e, p in parsed if e == "lost-run" and p.get("run") == run_id]
    if not lost:
        try:
            exists = journal.get_run(run_id) is not None
        except AgentRuntimeError:
            return  # the database is gone too: the worker could not ask who holds it
        if exists:
            raise HandedBack(f"a fenced worker of {run_id} did not say who holds it now")
        return
    missing = [k for k in LOST_KEYS if k not in lost[-1]]
    if missing or lost[-1]["mine"] != fenced[-1]["generation"]:
        raise HandedBack(
            f"the lost-run line of {run_id} is {lost[-1]}, after the fenced line {fenced[-1]}"
        )
