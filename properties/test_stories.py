"""The small scope's outage stories, and the checks they feed, each against a slip it exists
to catch (found by mutation testing: see ARCHITECTURE.md, mutation testing).

Each slip is planted in the runtime this process runs (the in-process runner's workers are
threads): a release that frees nothing, a call tried once, a read's failure that parks.
"""

from __future__ import annotations

import dataclasses
import threading
from typing import Any

import pytest

from agent_runtime import Lease
from agent_runtime.backoff import Backoff
from agent_runtime.loop import claiming, lease, worker
from agent_runtime.operator import views
from agent_runtime.store.journal import Journal
from agent_runtime.tools import acting
from agent_runtime.tools.acting import Actor

from .events import Event
from .planting import failure, plant_python, plant_sql
from .runners import InProcessRunner
from .scope import story
from .variants import Variant


class KeepingJournal(Journal):
    """A resumable stop that frees nothing: the run is taken only once its lease expires."""

    def release(self, lease: Lease, reason: str, delay: float = 0.0) -> bool:
        return False


def test_a_stop_on_an_outage_must_leave_the_run_free(runner: InProcessRunner) -> None:
    events = story("support", "outage", "", 1, "file_ticket")
    assert failure(runner, events) == ""
    runner.variant = Variant(name="keeping", summary="frees nothing", journal=KeepingJournal)
    assert "[released] run r0" in failure(runner, events)


def _attempts_with(
    monkeypatch: pytest.MonkeyPatch, *, reads_only: bool = False, **changes: Any
) -> None:
    """Every call's attempts made as by a tool with ``changes`` (a read's, if
    ``reads_only``)."""
    attempts = Actor._attempts

    def planted(self: Actor, lease: Lease, tool: Any, *args: Any, **kwargs: Any) -> Any:
        if not reads_only or tool.effect == "read":
            tool = dataclasses.replace(tool, **changes)
        return attempts(self, lease, tool, *args, **kwargs)

    monkeypatch.setattr(Actor, "_attempts", planted)


def test_one_failed_request_must_not_stop_the_step(
    runner: InProcessRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    events = story("support", "remote_fault", "", 1, "file_ticket")
    assert failure(runner, events) == ""
    _attempts_with(monkeypatch, retries=0)  # the client's retry gone: one attempt
    assert "[worker] run r0 step 1: w1 stopped with RemoteUnavailable" in failure(runner, events)


def test_a_reads_failed_request_must_not_park_the_run(
    runner: InProcessRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    events = story("support", "remote_fault", "", 0, "lookup_order")
    assert any(e.fault == "fail_lookups" for e in events)
    assert failure(runner, events) == ""
    _attempts_with(monkeypatch, reads_only=True, effect="once")  # a read's failure parks
    assert "[parked] run r0" in failure(runner, events)


@pytest.mark.parametrize(
    ("mutant", "how", "kind", "seq", "caught"),
    [
        # the progress CTE joined to every run: the other run's progress moves
        ("record_confirm:drop_conjunct:38b398e0", "two_runs", "provisioning", 0, "[progress]"),
        # progress written only while attempts are 0: a confirm after a claim leaves them
        ("record_confirm:flip_comparison:6967db0c", "two_runs", "provisioning", 0, "[progress]"),
        ("park_run:relax_commit:3a8258e3", "parked_db_crash", "once", 2, "[parked_acted]"),
        ("release_run:relax_commit:3a8258e3", "released_db_crash", "provisioning", 0, "[lost"),
        ("renew_lease:relax_commit:3a8258e3", "renewed_db_crash", "provisioning", 0, "[lost"),
        ("adopt_lease:relax_commit:86db04f8", "adopted_db_crash", "provisioning", 0, "[lease"),
        ("redo_intent:relax_commit:86db04f8", "redone_db_crash", "once", 2, "[duplicate_effect]"),
        ("fail_run:relax_commit:3a8258e3", "failed_db_crash", "provisioning", 0, "[lost_state]"),
        ("record_send:relax_commit:86db04f8", "resent_db_crash", "provisioning", 0, "[sends_exact"),
        ("claim_expired:relax_commit:768c1e45", "orphaned_db_crash", "provisioning", 0, "[lost_s"),
        # an adoption renames every generation's claim of its run, or only the others'
        ("adopt_lease:drop_conjunct:22e7d00b", "overtaken", "provisioning", 0, "[claim_owner]"),
        ("adopt_lease:flip_comparison:50e6447b", "overtaken", "provisioning", 0, "[claim_owner]"),
        # ... or every run's claim of its generation
        ("adopt_lease:drop_conjunct:fdf6d3f5", "adopted_db_crash", "provisioning", 0, "[claim"),
        # a permanent error's failure fenced by the wrong generation, or failing other runs
        ("fail_run:flip_comparison:dfeaa360", "gave_up", "support", 1, "[failed] run r0"),
        ("fail_run:flip_comparison:e4fa8639", "gave_up", "provisioning", 0, "[failed] run r0"),
        # a fenced write of a call that does not lock the run row it reads: a claim commits
        # while it is held inside its statement, and it lands after the claim
        ("record_intent:drop_lock:638f6371", "race_intent", "support", 1, "[overtaken_w"),
        ("record_send:drop_lock:638f6371", "race_send", "support", 1, "[overtaken_w"),
        ("record_confirm:drop_lock:638f6371", "race_confirm", "support", 1, "[overtaken_w"),
        # a takeover that does not lock the run row it reads: held behind another claim's
        # update, it takes the run a second time from the owner that one replaced
        ("claim_run:drop_lock:25949f66", "race_claim", "support", 1, "[double_claim]"),
        # ... and a sweep that does not lock its runs (FOR UPDATE SKIP LOCKED dropped)
        ("claim_expired:drop_lock:85791f51", "race_sweep", "support", 1, "[double_claim]"),
        # a restart's landing wait read from another call of its run (an earlier one, whose
        # bound is not the held email's): the wait it reads does not follow the clock, and
        # the worker gives the run up where it should have waited
        # an operator's redo made an intent again at every run's call of that step: r1's
        # redo, pending too, is taken from it (sends_exact), and r1 parks once more
        ("redo_intent:drop_conjunct:e5eada85", "two_parked", "once", 2, "[sends_exact] run r1"),
        # a re-send's start journaled on every run's call in doubt at that step
        ("record_send:drop_conjunct:ed806280", "two_resent", "provisioning", 1, "[sends_exact]"),
        ("landing_wait:drop_conjunct:cb3d06ae", "held_killed", "support", 2, "[worker] run r0"),
    ],
)
def test_a_story_catches_the_sql_slip_it_was_written_for(
    runner: InProcessRunner,
    monkeypatch: pytest.MonkeyPatch,
    mutant: str,
    how: str,
    kind: str,
    seq: int,
    caught: str,
) -> None:
    events = story(kind, how, "after_intent", seq)  # a step story ignores the point
    assert failure(runner, events) == ""
    plant_sql(monkeypatch, f"sql/queries.sql:{mutant}")
    assert caught in failure(runner, events)


@pytest.mark.parametrize("kill", [False, True])
def test_a_restart_proves_its_crashed_predecessor_dead(
    runner: InProcessRunner, monkeypatch: pytest.MonkeyPatch, kill: bool
) -> None:
    """An in-process worker's token names a process of its own, which dies with it: reaped
    (its pid gone), or killed and left a zombie; the takeover must record the owner as
    proved dead, not fenced out as if it still ran."""
    events = (
        Event(op="start", run=0),
        Event(op="crash", run=0, point="after_intent", seq=0, kill=kill),
        Event(op="restart", run=0),
    )
    assert failure(runner, events) == ""
    if kill:  # a zombie answers kill(pid, 0): only /proc tells it is dead
        monkeypatch.setattr(lease, "_is_zombie", lambda pid: False)
    else:  # the pid probe proves nothing
        monkeypatch.setattr(claiming, "owner_is_dead", lambda owner: False)
    found = failure(runner, events)  # the operator's list tells it first, then the claim
    assert "[owner_view] run r0" in found or "[claim_truth] run r0" in found


def test_a_worker_that_ends_closes_its_heartbeats_connection(
    runner: InProcessRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A heartbeat that forgets its connection without closing it leaks one per run: in
    production, until the database refuses connections."""
    events = (Event(op="start", run=0), Event(op="tick", seconds=3.0), Event(op="step", run=0))
    assert failure(runner, events) == ""

    def forget(self: lease.Heartbeat) -> None:
        self._conn = None  # dropped, never closed

    monkeypatch.setattr(lease.Heartbeat, "_disconnect", forget)
    assert "[leak] run r0" in failure(runner, events)


def test_a_worker_returns_only_after_its_heartbeats_thread_ended(
    runner: InProcessRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Heartbeat.stop waits for its thread: a renewal still under way when the worker has
    returned would outlive the lease it renews, its connection still open."""
    events = (Event(op="start", run=0), Event(op="tick", seconds=3.0), Event(op="step", run=0))
    assert failure(runner, events) == ""

    def no_wait(self: lease.Heartbeat) -> None:
        self._stop.set()  # as stop's join condition inverted would: never joined
        if self._thread is None or not self._thread.is_alive():
            self._disconnect()

    monkeypatch.setattr(lease.Heartbeat, "stop", no_wait)
    assert "still running after the worker returned" in failure(runner, events)


def test_a_heartbeats_thread_never_holds_the_process_at_exit(
    runner: InProcessRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    events = (Event(op="start", run=0), Event(op="step", run=0))
    assert failure(runner, events) == ""

    def not_a_daemon(self: lease.Heartbeat) -> lease.Heartbeat:  # as daemon=False would
        self._thread = threading.Thread(target=self._loop, daemon=False)
        self._thread.start()
        return self

    monkeypatch.setattr(lease.Heartbeat, "start", not_a_daemon)
    assert "not a daemon" in failure(runner, events)


def test_a_slow_cloud_fails_every_attempt_of_a_worker_configured_after_it(
    runner: InProcessRunner,
) -> None:
    """The latency knob lasts: a worker started with more retries than the workers of the
    moment the cloud turned slow still meets the outage (found by the ci draws)."""
    events = (
        Event(op="configure", setting="tool_retries", n=0),
        Event(op="cloud_fault", fault="latency", seconds=1.5),
        Event(op="configure", setting="tool_retries", n=2),
        Event(op="start", run=1, agent="once"),
        Event(op="stall", run=1, point="after_confirm", seq=3),
    )
    assert failure(runner, events) == ""


def test_a_worker_on_a_cancelled_run_must_not_end_as_if_it_were_done(
    runner: InProcessRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    events = (Event(op="start", run=0), Event(op="cancel", run=0), Event(op="restart", run=0))
    assert failure(runner, events) == ""
    claim = claiming.claim_run

    def done_if_cancelled(journal: Journal, run_id: str, *args: Any, **kwargs: Any) -> Any:
        run = journal.get_run(run_id)
        if run is not None and run.status == "cancelled":  # as `status <= "done"` would
            return None
        return claim(journal, run_id, *args, **kwargs)

    monkeypatch.setattr(worker, "claim_run", done_if_cancelled)
    assert "[worker] run r0" in failure(runner, events)


def test_the_operators_list_says_an_owner_is_gone_exactly_when_it_is(
    runner: InProcessRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run backing off after an outage has no owner to be gone; a run whose worker died
    holding a live lease has one (an operator takes a run over on that word)."""
    events = story("support", "outage", "", 1, "file_ticket")
    assert failure(runner, events) == ""
    probe = lease.owner_is_dead
    monkeypatch.setattr(views, "owner_is_dead", lambda owner: not owner or probe(owner))
    assert "[owner_view] run r0" in failure(runner, events)


def test_a_checked_call_is_sent_before_anyone_waits_for_it_to_land(
    runner: InProcessRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker that waits for its own first attempt to land before sending it (as
    ``again = checking or attempt <= 1`` would) releases a run nothing of which can be in
    flight: the wait explains nothing."""
    events = story("support", "held_retried", "", 2, "send_email")
    assert failure(runner, events) == ""
    attempts = Actor._attempts

    def waiting_first(self: Actor, lease: Lease, tool: Any, context: Any, args: Any, call: Any,
                      **kwargs: Any) -> Any:  # fmt: skip
        if tool.effect == "checked":
            self._await_landing(lease, call)
        return attempts(self, lease, tool, context, args, call, **kwargs)

    monkeypatch.setattr(Actor, "_attempts", waiting_first)
    assert "stopped with CallInFlight" in failure(runner, events)


def test_a_check_waits_out_the_last_second_of_an_in_flight_bound(
    runner: InProcessRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A restart half a second before a held send's in-flight bound must still wait (and,
    its clock frozen, release the run): a check that calls a second or less "landed" (as
    ``if seconds <= 1`` would: 7e3876b5) finds nothing, sends again, and the held request
    lands after it."""
    events = story("support", "held_late", "", 2, "send_email")
    assert failure(runner, events) == ""
    planted = plant_python(monkeypatch, acting, "if seconds <= 0:", "if seconds <= 1:")
    monkeypatch.setattr(Actor, "_await_landing", planted.Actor._await_landing)
    found = failure(runner, events)
    assert "[duplicate_effect] run r0: the remotes hold 2 emails" in found


class LateBackoff(Backoff):
    """The wait of the next retry, one too far along (as ``delay(attempt ** 1)`` would)."""

    def delay(self, attempt: int) -> float:
        return super().delay(attempt + 1)


def _retries_without_waits(monkeypatch: pytest.MonkeyPatch) -> None:
    """A retry goes out at once (as ``if attempt < 1`` would: no wait, no guard)."""
    attempts = Actor._attempts

    def hasty(self: Actor, *args: Any, **kwargs: Any) -> Any:
        self._sleep = lambda seconds: None
        return attempts(self, *args, **kwargs)

    monkeypatch.setattr(Actor, "_attempts", hasty)


@pytest.mark.parametrize("slip", ["late", "hasty", "more"])
def test_a_tools_retry_waits_its_declared_backoff(
    runner: InProcessRunner, monkeypatch: pytest.MonkeyPatch, slip: str
) -> None:
    events = story("support", "outage" if slip == "more" else "remote_fault", "", 1, "file_ticket")
    assert failure(runner, events) == ""
    if slip == "more":  # one attempt beyond the declared retries (664468aa)
        planted = plant_python(
            monkeypatch, acting, "range(1, tool.retries + 2)", "range(1, tool.retries + 3)"
        )
        monkeypatch.setattr(Actor, "_attempts", planted.Actor._attempts)
        caught = "[backoff] run r0 step 1: w1 backed off for attempt 4 of file_ticket, which"
    elif slip == "late":
        monkeypatch.setattr(worker, "Backoff", LateBackoff)
        caught = "[backoff] run r0 step 1: w1 waited 1.0s before attempt 2 of file_ticket"
    else:
        _retries_without_waits(monkeypatch)
        caught = "[backoff] run r0 step 1: w1 made attempt 2 of file_ticket after 0 backoff"
    assert caught in failure(runner, events)


@pytest.mark.parametrize(
    ("how", "caught"), [("wait_outpaced", "[fenced_act] run r0"), ("wait_cancelled", "[cancel")]
)
def test_a_clients_wait_ends_by_asking_whether_the_run_is_still_held(
    runner: InProcessRunner, monkeypatch: pytest.MonkeyPatch, how: str, caught: str
) -> None:
    """A takeover or an operator's cancel that lands while the cloud's client waits to send
    again: the re-send must not go out (``OwnedWait`` checks the lease after its wait)."""
    events = story("provisioning", how, "", 0, "create_server")
    assert failure(runner, events) == ""
    monkeypatch.setattr(lease.OwnedWait, "__call__", lambda self, seconds: self._sleep(seconds))
    assert caught in failure(runner, events)


def _heartbeat_unheard(self: worker.Worker, lease: Lease) -> None:
    """``Worker._guard`` as its ``is not`` -> ``is`` mutant has it: the flag never read."""


@pytest.mark.parametrize(
    ("how", "kind", "point"),
    [
        ("outpaced", "support", "after_intent"),  # its first attempt: the guard alone before it
        ("outpaced", "once", "after_intent"),  # the lookup of a two-call answer
        ("wait_outpaced", "support", ""),  # its retry, after the backoff's wait
    ],
)
def test_a_worker_whose_heartbeat_found_the_run_taken_over_reads_nothing_more(
    runner: InProcessRunner, monkeypatch: pytest.MonkeyPatch, how: str, kind: str, point: str
) -> None:
    """Only the guard stands before a ``read`` tool's request (no fenced statement does):
    the desk's lookups count in ``fenced_act`` (class 19, ``worker:_guard:...:256b5577``)."""
    events = story(kind, how, point, 0, "lookup_order")
    assert failure(runner, events) == ""
    monkeypatch.setattr(worker.Worker, "_guard", _heartbeat_unheard)
    caught = failure(runner, events)
    assert "[fenced_act] run r0: w1 (generation 1) read A-1001 from the desk" in caught
