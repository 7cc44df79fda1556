"""Which of the runtime's writes a database crash may take back: the design's table, as data.

Every write the runtime makes commits either **durable** (it waits for the WAL flush, which
makes everything before it in the WAL durable too, whoever wrote it) or **relaxed**
(``synchronous_commit = off`` for its own transaction: it returns before the flush). A
crash of the database server takes back exactly the relaxed commits made since the last
flush, in WAL order; a process crash takes back nothing.

:data:`WRITES` is that table, one row per write: ARCHITECTURE.md's "What a database crash
can lose" holds the same table, rendered from this one (:func:`markdown`,
``test_durability_table.py`` keeps them equal), and the same test checks each row against
the runtime's SQL (a statement that sets ``synchronous_commit`` off, or
``journal.confirm_commit`` for a confirm). The shadow (:mod:`properties.shadow`) asks
:func:`relaxed` for every row or change it saw disappear after a database crash: only a
relaxed write not followed by any durable one may go; nothing durable is ever excused.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

Commit = Literal["relaxed", "durable"]
RELAXED: Final = "relaxed"
DURABLE: Final = "durable"
EFFECTS: Final = ("keyed", "checked", "read", "once")


@dataclass(frozen=True)
class Write:
    """One write of the runtime: its named statement, what it journals, how it commits,
    and what a database crash that takes it costs (for a relaxed one)."""

    statement: str
    what: str
    commit: Commit
    lost: str = "never lost"
    effects: tuple[str, ...] = EFFECTS  # the calls' contracts it applies to

    def cells(self) -> list[str]:
        effects = "" if self.effects == EFFECTS else f" ({', '.join(self.effects)})"
        return [self.what, f"`{self.statement}`{effects}", self.commit, self.lost]


WRITES: Final[tuple[Write, ...]] = (
    Write("create_run", "a run created", DURABLE),
    Write(
        "record_decision",
        "a model answer with its decisions (and `llm_calls`)",
        RELAXED,
        "the model is asked again: one paid call, no effect",
    ),
    Write("record_intent", "an intent", DURABLE),
    Write(
        "record_confirm",
        "a confirm (or a failed call's error)",
        RELAXED,
        "the call is in doubt again; its contract settles it: a re-send answered "
        "`already_done`, a check that finds it, a read read again",
        effects=("keyed", "checked", "read"),
    ),
    Write("record_confirm", "a `once` call's confirm", DURABLE, effects=("once",)),
    Write("redo_intent", "an operator's redo, made the worker's intent", DURABLE),
    Write("claim_run", "a claim", DURABLE),
    Write("claim_expired", "a sweep's claim", DURABLE),
    Write("adopt_lease", "a worker's adoption of its lease", DURABLE),
    Write("renew_lease", "a heartbeat's renewal", DURABLE),
    Write("release_run", "a release (a clean stop)", DURABLE),
    Write("expire_lease_of", "a dead child's lease ended", DURABLE),
    Write("finish_run", "the finish", DURABLE),
    Write("park_run", "a park (needs attention)", DURABLE),
    Write("fail_run", "a failure", DURABLE),
    Write("give_up_exhausted", "a sweep giving up", DURABLE),
    Write("operator_cancel_run", "an operator's cancel", DURABLE),
    Write("operator_retry_run", "an operator's retry", DURABLE),
    Write("operator_end_backoff", "an operator ending a backoff", DURABLE),
    Write("operator_resolve_call", "an operator's resolution (confirm, fail, redo)", DURABLE),
    Write("clock_advance", "the test clock moved (tests and the suite only)", DURABLE),
)

HEADER: Final = ("write", "statement", "commit", "a database crash that takes it costs")


def write(statement: str, effect: str | None = None) -> Write:
    """The table's row for ``statement`` (for a confirm: of a call under ``effect``)."""
    for w in WRITES:
        if w.statement == statement and (effect is None or effect in w.effects):
            return w
    raise KeyError(f"{statement!r} ({effect}) is not in the durability table")


def relaxed(statement: str, effect: str | None = None) -> bool:
    """Whether a database crash may take this write back (if no durable one followed)."""
    return write(statement, effect).commit == RELAXED


def markdown() -> str:
    """The table as ARCHITECTURE.md shows it."""
    rows = [list(HEADER), ["---"] * len(HEADER), *(w.cells() for w in WRITES)]
    return "\n".join("| " + " | ".join(cells) + " |" for cells in rows)
