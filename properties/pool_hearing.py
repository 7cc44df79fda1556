"""The supervisors' log lines a fixed pool story hears, each with where the story was
(:mod:`properties.pool_states`, :mod:`properties.pool_unserved`): the lines are what the
judges read, since a supervisor's decisions (kill, give up, name a run) are said there."""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Final

SUPERVISOR_LOG: Final = "agent_runtime.supervisor"

Said = list[tuple[int, str]]  # (index of the event being applied, log line)


class _Heard(logging.Handler):
    def __init__(self, where: Callable[[], int]) -> None:
        super().__init__(logging.INFO)
        self.where = where
        self.lines: Said = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append((self.where(), record.getMessage()))


@contextmanager
def hearing(where: Callable[[], int]) -> Iterator[Said]:
    """The supervisors' log lines while the block runs, each with ``where()`` then."""
    handler = _Heard(where)
    names = [f"{SUPERVISOR_LOG}.{m}" for m in ("supervision", "takeback", "unserved")]
    loggers = [logging.getLogger(n) for n in names]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.INFO)
        lg.addHandler(handler)
    try:
        yield handler.lines
    finally:
        for lg, level in zip(loggers, levels, strict=True):
            lg.removeHandler(handler)
            lg.setLevel(level)


def at(said: Said, pattern: str) -> list[tuple[int, str]]:
    return [(i, line) for i, line in said if re.match(pattern, line)]
