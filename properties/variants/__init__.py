"""Deliberately broken runtimes: the suite must catch every one of them.

Each variant is one plausible, small mistake a developer could make in
``src/agent_runtime`` -- a predicate, a commit setting, a missing check, an off-by-one --
written from the protocol (DESIGN.md sections 3 and 5), not for one schedule. It swaps
the runtime's :class:`~agent_runtime.store.journal.Journal`, its
:class:`~agent_runtime.loop.worker.Worker`, or the supervisor's claim for a subclass or a
statement of ``properties/sql/variants.sql``. ``test_variants.py`` runs the ``ci`` profile
against each and requires a violation, a short shrunk schedule, saved, that fails again
against the variant and passes against the real runtime.

=========================  ======================  ===========================================
variant                    kind                    what is broken
=========================  ======================  ===========================================
``no_decision_replay``     guarantee removed       a restart asks the model again for a decided
                                                   step and overwrites the decision
``fresh_key``              guarantee removed       a stranded intent is re-sent under a new key
``no_intent_resolution``   guarantee removed       a restart assumes a stranded intent worked
``no_fencing``             guarantee removed       journal writes ignore owner and generation
``confirm_before_call``    order of writes         the confirm is written before the call
``claim_ignores_lease``    claim                   the sweep claims without looking at leases
``claim_run_flipped``      wrong predicate         a claim's lease comparison points the wrong
                                                   way (takes live leases, refuses expired)
``claim_ignores_backoff``  wrong predicate         a free run is claimable at once, before the
                                                   backoff of its last resumable stop
``renew_any_owner``        renewal                 the heartbeat renews without checking who
                                                   holds the run
``unchecked_model_call``   ownership check         "do I still own the run?" before the model
                                                   call always says yes
``release_unfenced``       ownership check         a clean stop frees the run whoever holds it
``heartbeat_ignored``      ignored signal          the worker never reads what its heartbeat
                                                   found, and acts after being fenced
                                                   (equivalent since issue 21's point 3: the
                                                   journal is read before every send)
``async_intent``           durability              the intent commits without the WAL flush
``decision_relaxes_session``  durability           the decision's relaxed commit is set for the
                                                   session, so the intent after it skips the
                                                   flush too
``once_confirm_relaxed``   durability              a once call's confirm commits relaxed, like
                                                   the others: a crash may take it back
``retry_fresh_key``        retry path              a retry re-sends under a key of its own
                                                   attempt (a restart uses the journaled one)
``status_from_attempt``    derived status          ``remote_status`` comes from the attempt
                                                   number, not from the cloud's answer
``walk_off_by_one``        off-by-one              a restart resumes after the last decided
                                                   step, skipping one never acted on
``history_join_any_run``   missing join column     the history join matches calls by step only,
                                                   picking up other runs' calls
``check_skipped``          contract ignored        a restart re-sends a checked call without
                                                   asking the remote first
``once_resent``            contract confused       a restart re-sends a stranded once call as
                                                   if it were keyed, instead of parking the run
``unchecked_send``         ownership check         no ownership check before a checked or once
                                                   call, whose remote fences nothing
``keyed_send_unchecked``   ownership check         a keyed call is left to the remote's fencing,
                                                   which a cancel never reaches
``parked_claimable``       status list             the sweep claims a run that needs attention
``answer_first_call_only`` lost element            a restart reads back one decision per model
                                                   answer: an answer's later calls are forgotten
``adopt_sees_calls_only``  wrong table             the adoption finds "no steps yet" by looking
                                                   at the calls: a decided, unsent step is lost
``confirm_unjoined``      missing join            the confirm finds its call by key and no
                                                   longer joins the fence: a zombie's lands
``check_in_flight``        request in flight       a checked call is checked while an earlier
                                                   attempt may still act at the remote
=========================  ======================  ===========================================
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from agent_runtime.loop.worker import Worker
from agent_runtime.store import db
from agent_runtime.store.journal import Journal

from .. import sqlfile
from . import journals, workers

Claim = Callable[[db.Connection, Mapping[str, Any]], list[db.Row]]


def runtime_claim(conn: db.Connection, params: Mapping[str, Any]) -> list[db.Row]:
    """The supervisor's own sweep claim (``claim_expired``)."""
    return db.run(conn, "claim_expired", params)


def careless_claim(conn: db.Connection, params: Mapping[str, Any]) -> list[db.Row]:
    return sqlfile.rows(conn, "careless_claim_expired", params)


def parked_claim(conn: db.Connection, params: Mapping[str, Any]) -> list[db.Row]:
    return sqlfile.rows(conn, "parked_claim_expired", params)


@dataclass(frozen=True, kw_only=True)
class Variant:
    name: str
    summary: str
    kind: str = "correct"
    journal: type[Journal] = Journal
    worker: type[Worker] = Worker
    claim: Claim = runtime_claim  # the sweep's claim of expired runs (the supervisor's)


CORRECT: Final = Variant(name="correct", summary="the runtime as shipped")

VARIANTS: Final[dict[str, Variant]] = {
    v.name: v
    for v in (
        Variant(
            name="no_decision_replay",
            kind="guarantee removed",
            summary="a restart asks the model again for a decided step and overwrites it",
            journal=journals.ForgetfulJournal,
        ),
        Variant(
            name="fresh_key",
            kind="guarantee removed",
            summary="a stranded intent is re-sent under a fresh idempotency key",
            worker=workers.FreshKeyWorker,
        ),
        Variant(
            name="no_intent_resolution",
            kind="guarantee removed",
            summary="a restart assumes a stranded intent worked and carries on",
            worker=workers.CarryOnWorker,
        ),
        Variant(
            name="no_fencing",
            kind="guarantee removed",
            summary="journal writes ignore the owner and generation",
            journal=journals.UnfencedJournal,
        ),
        Variant(
            name="confirm_before_call",
            kind="order of writes",
            summary="the confirm is written before the cloud is called",
            worker=workers.EagerConfirmWorker,
        ),
        Variant(
            name="claim_ignores_lease",
            kind="claim",
            summary="the supervisor's sweep claims runs without looking at their lease",
            claim=careless_claim,
        ),
        Variant(
            name="claim_run_flipped",
            kind="wrong predicate",
            summary="a claim takes live leases without proof and refuses expired ones",
            journal=journals.FlippedClaimJournal,
        ),
        Variant(
            name="claim_ignores_backoff",
            kind="wrong predicate",
            summary="a free run is claimable at once, before its backoff has passed",
            journal=journals.BackoffBlindJournal,
        ),
        Variant(
            name="renew_any_owner",
            kind="renewal",
            summary="the heartbeat's renewal does not check who holds the run",
            journal=journals.CarelessRenewalJournal,
        ),
        Variant(
            name="unchecked_model_call",
            kind="ownership check",
            summary="the ownership check before a model call always passes",
            journal=journals.BlindJournal,
        ),
        Variant(
            name="release_unfenced",
            kind="ownership check",
            summary="a clean stop frees the run whoever holds it now",
            journal=journals.UnfencedReleaseJournal,
        ),
        Variant(
            name="heartbeat_ignored",
            kind="ignored signal",
            summary="the worker never reads what its heartbeat found",
            worker=workers.HeartbeatDeafWorker,
        ),
        Variant(
            name="async_intent",
            kind="durability",
            summary="the intent commits without waiting for the WAL flush",
            journal=journals.RelaxedIntentJournal,
        ),
        Variant(
            name="decision_relaxes_session",
            kind="durability",
            summary="the decision's synchronous_commit=off leaks into the session",
            journal=journals.LeakyRelaxedJournal,
        ),
        Variant(
            name="once_confirm_relaxed",
            kind="durability",
            summary="a once call's confirm commits without waiting for the WAL flush",
            journal=journals.RelaxedOnceConfirmJournal,
        ),
        Variant(
            name="retry_fresh_key",
            kind="retry path",
            summary="the client's retry re-sends under a key of its own attempt",
            worker=workers.RetryKeyWorker,
        ),
        Variant(
            name="status_from_attempt",
            kind="derived status",
            summary="remote_status comes from the attempt number, not the cloud's answer",
            worker=workers.AttemptStatusWorker,
        ),
        Variant(
            name="walk_off_by_one",
            kind="off-by-one",
            summary="a restart resumes after the last decided step, skipping an unacted one",
            worker=workers.WalkPastDecisionsWorker,
        ),
        Variant(
            name="history_join_any_run",
            kind="missing join column",
            summary="the restart's history join matches calls by step number only",
            journal=journals.JoinedHistoryJournal,
        ),
        Variant(
            name="check_skipped",
            kind="contract ignored",
            summary="a restart re-sends a checked call without asking the remote first",
            worker=workers.CheckBlindWorker,
        ),
        Variant(
            name="check_in_flight",
            kind="request in flight",
            summary="a checked call is checked while an earlier attempt may still act",
            worker=workers.EarlyCheckWorker,
        ),
        Variant(
            name="once_resent",
            kind="contract confused",
            summary="a restart re-sends a stranded once call as if it were keyed",
            worker=workers.OnceAsKeyedWorker,
        ),
        Variant(
            name="unchecked_send",
            kind="ownership check",
            summary="no ownership check before a call whose remote fences nothing",
            worker=workers.OwnerBlindSendWorker,
        ),
        Variant(
            name="keyed_send_unchecked",
            kind="ownership check",
            summary="a keyed call is left to the remote's fencing, which a cancel never reaches",
            worker=workers.RemoteFencedWorker,
        ),
        Variant(
            name="parked_claimable",
            kind="status list",
            summary="the supervisor's sweep claims a run that needs attention",
            claim=parked_claim,
        ),
        Variant(
            name="answer_first_call_only",
            kind="lost element",
            summary="a restart reads back one decision per model answer, forgetting the rest",
            journal=journals.FirstCallJournal,
        ),
        Variant(
            name="adopt_sees_calls_only",
            kind="wrong table",
            summary="the adoption looks for steps among the calls, missing an unsent decision",
            journal=journals.CallsOnlyAdoptJournal,
        ),
        Variant(
            name="confirm_unjoined",
            kind="missing join",
            summary="the confirm finds its call by key without joining the fence",
            journal=journals.UnjoinedConfirmJournal,
        ),
    )
}


def get(name: str | None) -> Variant:
    if name is None or name == CORRECT.name:
        return CORRECT
    try:
        return VARIANTS[name]
    except KeyError:
        raise KeyError(
            f"no runtime variant {name!r}; known: {CORRECT.name}, {', '.join(VARIANTS)}"
        ) from None
