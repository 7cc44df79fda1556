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
:func:`confirm_write` and :func:`run_write` name the write behind a change the shadow saw.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Final, Literal

from .observe import CallRow, RunRow

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
    Write("record_send", "a later attempt's start (`lands_by`, `sends`)", DURABLE),
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
    Write("prune_batch", "final runs removed by retention", DURABLE),
    Write("schema_version_record", "a schema version applied", DURABLE),
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


# What a run row's state is made of: every column a durable write sets (llm_calls is the
# relaxed answer's, and goes with it).
RunState = tuple[str, str | None, int, datetime | None, str | None]
# The write that moves a run to a status.
STATUS_WRITES = {
    "done": "finish_run",
    "needs_attention": "park_run",
    "failed": "fail_run",
    "cancelled": "operator_cancel_run",
    "pending": "operator_retry_run",
}


def confirm_write(call: CallRow) -> Write:
    """The write that resolved ``call``: an operator's (no worker's generation on it) or the
    worker's confirm under the call's contract."""
    if call.remote_status == "operator" and call.confirm_generation is None:
        return write("operator_resolve_call")
    return write("record_confirm", call.effect)


def run_write(before: RunState, after: RunState) -> Write:
    """The write that moved a run row from ``before`` to ``after`` (the first that fits)."""
    status, owner, generation, lease, _ = after
    if generation != before[2]:
        return write("claim_run")
    if status != before[0]:
        if before[0] == "needs_attention" and status == "pending":
            return write("operator_resolve_call")
        return write(STATUS_WRITES.get(status, "release_run"))
    if owner != before[1]:
        return write("adopt_lease" if owner is not None else "release_run")
    if lease != before[3]:
        return write("renew_lease" if owner is not None else "operator_end_backoff")
    return write("release_run")  # the failure text alone


def run_state(row: RunRow) -> RunState:
    """The part of a run row only durable writes set."""
    return (row.status, row.owner, row.generation, row.lease_expires_at, row.failure)
