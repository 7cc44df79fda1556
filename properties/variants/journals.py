"""Broken journals: each one a small, plausible mistake in one statement or one read.

Each class changes what one of :class:`~agent_runtime.store.journal.Journal`'s methods sends to
the database (the statements are in ``properties/sql/variants.sql``), nothing else.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from typing import Any, Final

from agent_runtime.errors import LeaseLost
from agent_runtime.store import db
from agent_runtime.store.journal import Journal
from agent_runtime.store.records import Decision, History, Lease, ToolCall

from .. import sqlfile
from .mutations import EDITS


def written(journal: Journal, name: str, lease: Lease, what: str, **params: Any) -> list[db.Row]:
    """Run a statement (a variant's, or the runtime's) the way ``Journal._write`` does."""
    values = {"run": lease.run_id, "owner": lease.owner, "generation": lease.generation, **params}
    try:
        sqlfile.query(name)
    except KeyError:  # not a variant's: the runtime's own statement
        rows = db.run(journal.conn, name, values)
    else:
        rows = sqlfile.rows(journal.conn, name, values)
    if not rows:
        raise LeaseLost(f"run {lease.run_id} is no longer ours; {what} not written")
    return rows


def fenced(journal: Journal, name: str, lease: Lease, what: str, **params: Any) -> db.Row:
    """Run a variant statement the way ``Journal._fenced`` runs the real ones."""
    return written(journal, name, lease, what, **params)[0]


class ForgetfulJournal(Journal):
    """no_decision_replay: reads back only decisions whose call was confirmed, and
    overwrites a decision (and its intent) when the step is decided again."""

    OVERWRITE: Final = {
        "record_decision": "overwrite_decision",
        "record_intent": "overwrite_intent",
    }

    def history(self, run_id: str) -> History:
        full = super().history(run_id)
        acted = {seq for seq, call in full.calls.items() if call.confirmed}
        return History(
            decisions={s: d for s, d in full.decisions.items() if s in acted},
            calls={s: c for s, c in full.calls.items() if s in acted},
            answers=full.answers,
        )

    def _write(self, name: str, lease: Lease, what: str, **params: Any) -> list[dict[str, Any]]:
        return written(self, self.OVERWRITE.get(name, name), lease, what, **params)


class UnfencedJournal(Journal):
    """no_fencing: every fenced write runs its ``unfenced_*`` twin, which checks the run
    but not the owner and the generation."""

    def _write(self, name: str, lease: Lease, what: str, **params: Any) -> list[dict[str, Any]]:
        twin = f"unfenced_{name}"
        return written(self, twin if twin in EDITS else name, lease, what, **params)


class CallsOnlyAdoptJournal(Journal):
    """adopt_sees_calls_only: the adoption decides "no history to read" from the calls
    table, so a run whose last step was decided but never sent starts from nothing."""

    def _write(self, name: str, lease: Lease, what: str, **params: Any) -> list[dict[str, Any]]:
        twin = "calls_only_adopt_lease" if name == "adopt_lease" else name
        return written(self, twin, lease, what, **params)


class UnjoinedConfirmJournal(Journal):
    """confirm_unjoined: the confirm names its call by the key's values and the fence's CTE
    is still there, but the update no longer joins it, so a worker that lost the run
    confirms anyway (the slip the key-valued confirm of stop 19 makes easy)."""

    def _write(self, name: str, lease: Lease, what: str, **params: Any) -> list[dict[str, Any]]:
        twin = "unjoined_record_confirm" if name == "record_confirm" else name
        return written(self, twin, lease, what, **params)


class CarelessRenewalJournal(Journal):
    """renew_any_owner: the heartbeat's renewal finds the run by id and status only, so a
    worker that lost the run keeps its new owner's lease alive."""

    def renew(self, lease: Lease, seconds: float) -> datetime:
        row = fenced(self, "unfenced_renew_lease", lease, "lease renewal", seconds=seconds)
        expires: datetime = row["lease_expires_at"]
        return expires


class BlindJournal(Journal):
    """unchecked_model_call: "do I still own the run?" always says yes, so a worker that
    lost its run asks the model anyway (every write stays fenced)."""

    def check_owner(self, lease: Lease, what: str) -> None:
        return None


class FlippedClaimJournal(Journal):
    """claim_run_flipped: the claim's lease comparison points the wrong way: it takes over
    a live lease without proof and refuses an expired one."""

    CLAIM = "flipped_claim_run"

    def claim(
        self,
        run_id: str,
        owner: str,
        lease: float,
        *,
        dead_owner: str | None = None,
        dead_generation: int | None = None,
        forced: bool = False,
    ) -> Lease | None:
        params = {
            "run": run_id,
            "owner": owner,
            "lease": lease,
            "dead_owner": dead_owner,
            "dead_generation": dead_generation,
            "forced": forced,
        }
        row = sqlfile.one(self.conn, self.CLAIM, params)
        return (
            None if row is None else Lease(run_id=run_id, owner=owner, generation=row["generation"])
        )


class BackoffBlindJournal(FlippedClaimJournal):
    """claim_ignores_backoff: a run nobody holds is claimable at once, so a restart takes
    a run released on an error before its backoff has passed."""

    CLAIM = "backoff_blind_claim_run"


class RelaxedIntentJournal(Journal):
    """async_intent: the intent is written with ``synchronous_commit = off`` for the
    session (for speed, like the confirm), so a database crash may lose an intent whose
    request already went out."""

    def record_intent(
        self, lease: Lease, seq: int, effect: str = "keyed", in_flight: float | None = None
    ) -> ToolCall:
        sqlfile.rows(self.conn, "session_relaxed_commit")
        try:
            return super().record_intent(lease, seq, effect, in_flight)
        finally:
            sqlfile.rows(self.conn, "session_durable_commit")


class UnfencedReleaseJournal(Journal):
    """release_unfenced: a clean stop frees the run without checking who holds it now, so
    a zombie's stop hands its successor's live run back."""

    def release(self, lease: Lease, reason: str, delay: float = 0.0) -> bool:
        params = {
            "run": lease.run_id,
            "owner": lease.owner,
            "generation": lease.generation,
            "reason": reason,
            "delay": delay,
        }
        return sqlfile.one(self.conn, "unfenced_release_run", params) is not None


class JoinedHistoryJournal(Journal):
    """history_join_any_run: the restart reads decisions and calls in one join that matches
    the calls by step number only, so it picks up other runs' calls of the same step."""

    CALL_FIELDS: Final = (
        "idem_key", "state", "result", "remote_status", "confirm_generation", "effect"
    )  # fmt: skip

    def history(self, run_id: str) -> History:
        decisions: dict[int, Decision] = {}
        calls: dict[int, ToolCall] = {}
        for row in sqlfile.rows(self.conn, "joined_history", {"run": run_id}):
            seq = row["seq"]
            decisions[seq] = Decision.from_row(row)
            if row["idem_key"] is not None:
                calls[seq] = ToolCall(
                    seq=seq,
                    **{k: row[k] for k in self.CALL_FIELDS},
                    generation=row["call_generation"],
                    intent_at=row["intent_at"],
                    confirmed_at=row["confirmed_at"],
                )
        return History(decisions=decisions, calls=calls)


class FirstCallJournal(Journal):
    """answer_first_call_only: a restart reads back one decision per model answer (a
    history keyed by the answer, not by the step), so the later calls of an answer with
    several are forgotten; a worker that decided them itself still acts on all of them."""

    def history(self, run_id: str) -> History:
        full = super().history(run_id)
        seen: set[int] = set()
        kept: dict[int, Decision] = {}
        for seq in sorted(full.decisions):
            d = full.decisions[seq]
            if d.llm_call not in seen:
                seen.add(d.llm_call)
                kept[seq] = d
        return replace(full, decisions=kept)


class LeakyRelaxedJournal(Journal):
    """decision_relaxes_session: the decision's ``synchronous_commit = off`` is set for the
    session (``set_config(..., false)``, one argument from right), so every later commit
    of the connection -- the intent before its call, claims, the finish -- skips the flush
    too, and a database crash may take back an intent whose request already went out."""

    def _write(self, name: str, lease: Lease, what: str, **params: Any) -> list[dict[str, Any]]:
        leaky = "session_relaxed_decision" if name == "record_decision" else name
        return written(self, leaky, lease, what, **params)


class RelaxedOnceConfirmJournal(Journal):
    """once_confirm_relaxed: every confirm commits relaxed, a ``once`` call's too (its commit
    taken as any confirm's, not from ``journal.confirm_commit``), so a database crash may
    take back the record that the email went out: the restart finds the once call in doubt
    and parks a run whose call was done."""

    def record_confirm(
        self,
        lease: Lease,
        call: ToolCall,
        result: Any,
        remote_status: str,
        *,
        state: str = "confirmed",
    ) -> ToolCall:
        relaxed = replace(call, effect="keyed")  # the effect only chooses the commit here
        confirmed = super().record_confirm(lease, relaxed, result, remote_status, state=state)
        return replace(confirmed, effect=call.effect)
