"""The checks on ``tool_calls.sends``, the journal's count of a call's attempts.

**read_sends** (teardown, in-process runner): no call of a ``read`` tool has ``sends`` past
1, its intent's (a call the runtime refused is a read never sent: 0): a read acts on
nothing, so the runtime journals none of its retries as sent (``record_send``, for the
calls in doubt of the other contracts; schema.sql, ``tool_calls.sends``). Without it
acting's ``tool.effect is not "read"`` before ``record_send`` passed the suite twice over:
nothing read the count, and the suite's tools had their contracts as literals, the very
objects the runtime compares with (the desk's are ``agents.configured`` now). Seed-43
sample, docs/mutation-report-2026-12-04-seed43.md.

**sends_exact** (teardown, in-process runner): each call's ``sends`` is the number of its
attempts its own run's workers journaled -- its intent, each later attempt's start
(``record_send``) and each operator's redo made an intent again (``record_redo``) --
counted as the journal is asked to write them (:class:`AttemptCounts`): at least the
writes that returned, at most the writes asked for (one whose connection died may or may
not have committed). A call the runtime refused has 0. An attempt's write that lands on
another call's row (another run's at the same step, say) breaks it for both: the write
path's statements survived the suite when they named their call by fewer of its key's
values, since no check read the count of a call that was not a read.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable
from typing import Any, Final

from agent_runtime.store import db
from agent_runtime.store.journal import Journal
from agent_runtime.store.records import Lease

from . import sqlfile
from .violations import Violation

ATTEMPTS: Final = ("record_intent", "record_send", "record_redo")  # Journal's attempt writes
Key = tuple[str, int]  # (run, seq)


def read_sends(conn: db.Connection) -> list[Violation]:
    """**read_sends**: see the module's doc."""
    return [
        Violation(
            "read_sends",
            row["run_id"],
            row["seq"],
            f"a read call journaled {row['sends']} sends: a read's retries are not sends",
        )
        for row in sqlfile.rows(conn, "read_calls_sent")
    ]


class AttemptCounts:
    """Counts, per call, the attempt writes :class:`Journal` is asked for and the ones that
    returned, while installed (the in-process runner's workers are threads of this
    process, so every one of its journals goes through here). Several may be installed at
    once (one per runner): the journal's methods are wrapped once, for all of them."""

    def __init__(self) -> None:
        self.asked: Counter[Key] = Counter()
        self.written: Counter[Key] = Counter()

    def install(self) -> AttemptCounts:
        with _GUARD:
            if not _COUNTING:
                for name in ATTEMPTS:
                    original = getattr(Journal, name)
                    _ORIGINALS[name] = original
                    setattr(Journal, name, _counted(name, original))
            _COUNTING.append(self)
        return self

    def remove(self) -> None:
        with _GUARD:
            if self in _COUNTING:
                _COUNTING.remove(self)
            if not _COUNTING:
                for name, original in _ORIGINALS.items():
                    setattr(Journal, name, original)
                _ORIGINALS.clear()

    def clear(self) -> None:
        with _GUARD:
            self.asked.clear()
            self.written.clear()

    def problems(self, conn: db.Connection) -> list[Violation]:
        """**sends_exact**: see the module's doc."""
        found: list[Violation] = []
        with _GUARD:
            asked, written = Counter(self.asked), Counter(self.written)
        for row in sqlfile.rows(conn, "calls_sends"):
            key = (row["run_id"], row["seq"])
            low, high = written[key], asked[key]
            if low <= row["sends"] <= high:
                continue
            found.append(
                Violation(
                    "sends_exact",
                    row["run_id"],
                    row["seq"],
                    f"the call's row counts {row['sends']} attempts (sends), but its run's "
                    f"workers journaled {low} (asked for {high}): an attempt written onto "
                    "another call's row, or one of its own lost",
                )
            )
        return found


_GUARD: Final = threading.Lock()
_COUNTING: Final[list[AttemptCounts]] = []  # installed, each counting every attempt write
_ORIGINALS: Final[dict[str, Callable[..., Any]]] = {}  # Journal's own methods, while wrapped


def _counted(name: str, original: Callable[..., Any]) -> Callable[..., Any]:
    def counted(journal: Journal, lease: Lease, *args: Any, **kwargs: Any) -> Any:
        if name == "record_intent":
            seq = kwargs["seq"] if "seq" in kwargs else args[0]
        else:
            seq = (kwargs["call"] if "call" in kwargs else args[0]).seq
        key = (lease.run_id, int(seq))
        with _GUARD:
            for counts in _COUNTING:
                counts.asked[key] += 1
        result = original(journal, lease, *args, **kwargs)
        with _GUARD:
            for counts in _COUNTING:
                counts.written[key] += 1
        return result

    return counted
