"""Each invariant check, shown failing on a crafted snapshot and passing on a sound one."""

from __future__ import annotations

import dataclasses
import io
from typing import Any

import pytest

from mock_remotes.supportcore import ORDERS as mock_orders

from .accounting import Ask
from .baseline import Baseline, normalised, settled
from .invariants import no_divergence, no_duplicate_effect, parked_truth, remote_truth
from .observe import CallRow, DecisionRow, RunRow, Snapshot
from .profiles import active_profile
from .progress import Progress
from .remotes import Answer, EffectRow
from .shadow import Shadow

SERVER = {"name": "srv-1", "size": "small", "region": "local-1"}
RESULT = {"id": "i-0000001", "kind": "server", "status": "created", **SERVER, "ip": "10.0.0.1"}


def _snapshot(
    *,
    decisions: list[DecisionRow] | None = None,
    calls: list[CallRow] | None = None,
    effects: list[EffectRow] | None = None,
    model_calls: int = 1,
    status: str = "running",
    generation: int = 1,
    answers: list[Answer] | None = None,
) -> Snapshot:
    decisions = decisions if decisions is not None else [_decision()]
    return Snapshot(
        runs={
            "r0": RunRow(
                id="r0",
                status=status,
                owner=None,
                generation=generation,
                llm_calls=len({d.llm_call for d in decisions}),
                failure=None,
            )
        },
        decisions={"r0": {d.seq: d for d in decisions}},
        calls={"r0": {c.seq: c for c in (calls if calls is not None else [_call()])}},
        effects=effects if effects is not None else [_record()],
        model_calls={"r0": model_calls},
        answers=answers if answers is not None else [_answer()],
        answers_by_run={"r0": {d.llm_call: [] for d in decisions}},  # the seed's answers
    )


def _decision(seq: int = 0, args: dict[str, Any] | None = None, generation: int = 1) -> DecisionRow:
    return DecisionRow(
        seq=seq, tool="create_server", args=args or SERVER, llm_call=1, generation=generation
    )


def _call(key: str = "r0:0", result: dict[str, Any] | None = None) -> CallRow:
    return CallRow(
        seq=0,
        key=key,
        state="confirmed",
        result=result or RESULT,
        remote_status="created",
        generation=1,
        confirm_generation=1,
    )


def _record(key: str = "r0:0", id: str = "i-0000001") -> EffectRow:
    return EffectRow(
        key=key, run="r0", kind="server", id=id, args=SERVER, result=RESULT, generation=1
    )


def _answer(
    answer: str = "created", generation: int = 1, dropped: bool = False, seq: int = 1
) -> Answer:
    return Answer(
        remote="cloud",
        seq=seq,
        key="r0:0",
        run="r0",
        generation=generation,
        answer=answer,
        dropped=dropped,
    )


def _asks(*fates: str) -> list[Ask]:
    return [
        Ask(run="r0", seq=0, number=i + 1, worker=f"w{i + 1}", fate=f) for i, f in enumerate(fates)
    ]


def test_a_sound_snapshot_passes_every_check() -> None:
    now = _snapshot()
    assert no_duplicate_effect(now) == []
    assert no_divergence(now, _asks("journaled")) == []
    assert remote_truth(now) == []
    assert Shadow().check_and_update(now, {"r0": 1}) == []


def test_a_created_confirm_for_a_resend_the_cloud_answered_already_done_is_caught() -> None:
    resent = [_answer(dropped=True), _answer("already_done", seq=2)]
    (found,) = remote_truth(_snapshot(answers=resent))
    assert found.kind == "remote_truth"
    assert "confirmed r0:0 as created, but the remote answered generation 1's request" in str(found)
    assert "already_done" in str(found)
    other = [_answer(generation=2)]
    (missing,) = remote_truth(_snapshot(answers=other))
    assert "the remote answered no request of that generation" in str(missing)


def test_a_model_call_by_a_worker_that_lost_its_run_is_never_excused() -> None:
    asks = _asks("journaled", "lost")
    asks[1].generation, asks[1].run_generation = 1, 2
    asks[1].lose("w2 ended: LeaseLost", True)
    found = no_divergence(_snapshot(model_calls=2), asks)
    assert [v.kind for v in found] == ["zombie_model_call"]
    assert "a worker that lost its run bought a model answer" in str(found[0])


def test_a_database_crash_may_take_back_a_confirm_only_for_an_already_done_resend() -> None:
    shadow = Shadow()
    assert shadow.check_and_update(_snapshot(), {"r0": 1}) == []
    intent = CallRow(
        seq=0, key="r0:0", state="intent", result=None, remote_status=None, generation=1,
        confirm_generation=None,
    )  # fmt: skip
    (lost,) = shadow.check_and_update(_snapshot(calls=[intent]), {"r0": 1})
    assert "confirmed call changed" in str(lost)  # without a crash: lost state
    shadow = Shadow()
    shadow.check_and_update(_snapshot(), {"r0": 1})
    shadow.database_crashed()
    assert shadow.check_and_update(_snapshot(calls=[intent]), {"r0": 1}) == []
    (wrong,) = shadow.check_and_update(_snapshot(), {"r0": 1})  # re-sent, answered created
    assert "it must come back already_done with the same result" in str(wrong)


def test_a_decision_or_a_generation_a_database_crash_takes_back_is_lost_state() -> None:
    shadow = Shadow()
    shadow.check_and_update(_snapshot(generation=3), {"r0": 3})
    shadow.database_crashed()
    found = shadow.check_and_update(_snapshot(decisions=[], calls=[], generation=2), {"r0": 3})
    messages = " / ".join(str(v) for v in found)
    assert "decision create_server" in messages and "is gone after a database crash" in messages
    assert "its generation went back from 3 to 2" in messages


def test_two_servers_for_one_run_are_a_duplicate_effect() -> None:
    now = _snapshot(effects=[_record(), _record("r0:0~2", "i-0000002")])
    (found, *_) = no_duplicate_effect(now)
    assert found.kind == "duplicate_effect" and found.run == "r0"
    assert "hold 2 servers (i-0000001 under r0:0, i-0000002 under r0:0~2)" in str(found)


def test_a_changed_decision_is_lost_state() -> None:
    shadow = Shadow()
    shadow.check_and_update(_snapshot(), {})
    other = {**SERVER, "name": "srv-2"}
    (found,) = shadow.check_and_update(_snapshot(decisions=[_decision(args=other)]), {})
    assert (found.kind, found.run, found.seq) == ("lost_state", "r0", 0)
    assert "'srv-1'" in str(found) and "'srv-2'" in str(found)


def test_a_row_written_by_an_older_generation_is_a_stale_write() -> None:
    now = _snapshot(decisions=[_decision(generation=1)], calls=[], effects=[], generation=2)
    (found,) = Shadow().check_and_update(now, {"r0": 2})
    assert "stale write: a decision by generation 1" in str(found)


def test_a_confirm_naming_another_resource_than_the_cloud_holds_is_divergence() -> None:
    now = _snapshot(effects=[_record(id="i-0000009")])
    (found,) = no_divergence(now, _asks("journaled"))
    assert "confirmed with result i-0000001 (created) but the remote holds i-0000009" in str(found)


def test_a_resource_under_a_key_the_journal_never_wrote_is_divergence() -> None:
    now = _snapshot(effects=[_record(key="r0:0~2")], calls=[])
    (found,) = no_divergence(now, _asks("journaled"))
    assert "acted on key r0:0~2" in str(found) and "no intent under that key" in str(found)


def test_an_unexplained_or_repeated_model_call_is_divergence() -> None:
    twice = no_divergence(_snapshot(model_calls=2), _asks("journaled", "journaled"))
    assert any("decided 2 times" in str(v) for v in twice)
    lost = _asks("journaled", "lost")
    lost[1].reason = "w2 ended: UniqueViolation"
    (found,) = no_divergence(_snapshot(model_calls=2), lost)
    assert "answer dropped with nothing in the schedule to explain it" in str(found)
    lost[1].excused = True
    assert no_divergence(_snapshot(model_calls=2), lost) == []
    (uncounted,) = no_divergence(_snapshot(model_calls=3), lost)
    assert "the model counted 3 calls, the runner saw 2 asks" in str(uncounted)


def test_a_run_that_finished_differently_from_the_baseline_is_not_settled() -> None:
    baseline = Baseline(tools=("create_server", "done"), args=(normalised(SERVER), {}))
    done = DecisionRow(seq=1, tool="done", args={}, llm_call=2, generation=1)
    good = _snapshot(decisions=[_decision(), done], status="done", model_calls=2)
    assert settled(good, {"r0": baseline}, []) == []
    short = _snapshot(decisions=[_decision()], status="done")
    (found,) = settled(short, {"r0": baseline}, [])
    assert "finished with tools ['create_server']" in str(found)
    (unfinished,) = settled(_snapshot(), {"r0": baseline}, [])
    assert "never finished: running" in str(unfinished)


# -- the support agent's contracts ---------------------------------------------------------------

ORDER = {"order_id": "A-1001"}
EMAIL = {
    "to": "ada@example.test",
    "subject": "Ticket T-0000001: your order A-1001 (#3)",
    "body": "x",
}


def _support(
    *, deliveries: int = 1, effect: str = "checked", status: str = "found", state: str = "confirmed"
) -> Snapshot:
    """A support run: lookup (read), ticket (keyed), email (``effect``), as the desk has it."""
    lookup = mock_orders["A-1001"]
    ticket = {"id": "T-0000001", "status": "created", **ORDER, "summary": "broken (#2)"}
    sent = {"id": "M-0000001", "message_id": "r0:2", **EMAIL, "delivered_at": "now"}
    decisions = [
        DecisionRow(seq=0, tool="lookup_order", args=ORDER, llm_call=1, generation=1),
        DecisionRow(
            seq=1, tool="file_ticket", args={**ORDER, "summary": "broken (#2)"}, llm_call=2,
            generation=1,
        ),
        DecisionRow(seq=2, tool="send_email", args=EMAIL, llm_call=3, generation=1),
    ]  # fmt: skip
    calls = [
        CallRow(
            seq=0, key="r0:0", state="confirmed", result=dict(lookup), remote_status="read",
            generation=1, confirm_generation=1, effect="read",
        ),
        CallRow(
            seq=1, key="r0:1", state="confirmed", result=ticket, remote_status="created",
            generation=1, confirm_generation=1,
        ),
        CallRow(
            seq=2, key="r0:2", state=state, result=sent if state == "confirmed" else None,
            remote_status=status if state == "confirmed" else None, generation=1,
            confirm_generation=1 if status != "operator" else None, effect=effect,
        ),
    ]  # fmt: skip
    effects = [
        EffectRow(
            key="r0:1", run="r0", kind="ticket", id="T-0000001",
            args={**ORDER, "summary": "broken (#2)"}, result=ticket, generation=None,
        )
    ] + [
        EffectRow(
            key="r0:2", run="r0", kind="email", id=f"M-000000{i + 1}", args=EMAIL,
            result={**sent, "id": f"M-000000{i + 1}"}, generation=None,
        )
        for i in range(deliveries)
    ]  # fmt: skip
    answers = [
        Answer(remote="desk", seq=1, key="r0:1", run="r0", generation=1, answer="created",
               dropped=False),
        Answer(remote="desk", seq=2, key="r0:2", run="r0", generation=1, answer="found",
               dropped=False),
    ]  # fmt: skip
    now = _snapshot(decisions=decisions, calls=calls, effects=effects, answers=answers)
    return dataclasses.replace(
        now, runs={"r0": dataclasses.replace(now.runs["r0"], status=status_of(state, effect))}
    )


def status_of(state: str, effect: str) -> str:
    return "needs_attention" if state == "intent" and effect == "once" else "running"


def test_a_sound_support_run_passes_every_check() -> None:
    now = _support()
    assert no_duplicate_effect(now) == []
    assert remote_truth(now) == []
    assert parked_truth(now) == []
    assert [v for v in no_divergence(now, []) if "model" not in str(v)] == []


def test_an_email_delivered_twice_under_one_key_is_a_duplicate_effect() -> None:
    found = no_duplicate_effect(_support(deliveries=2))
    assert "r0:2 acted 2 times (email M-0000001, M-0000002)" in str(found[0])
    assert any("hold 2 emails" in str(v) for v in found)


def test_a_check_that_found_the_email_must_say_found() -> None:
    (found,) = remote_truth(_support(status="created"))
    assert "confirmed r0:2 as created, but the remote answered generation 1's request found" in (
        str(found)
    )


def test_an_operator_confirm_is_only_for_a_once_call() -> None:
    assert remote_truth(_support(effect="once", status="operator")) == []
    (found,) = remote_truth(_support(effect="checked", status="operator"))
    assert "says an operator confirmed it" in str(found)


def test_a_run_parked_without_a_once_call_in_doubt_is_a_parked_violation() -> None:
    assert parked_truth(_support(effect="once", state="intent")) == []
    now = _support(effect="checked", state="intent")
    parked = dataclasses.replace(
        now, runs={"r0": dataclasses.replace(now.runs["r0"], status="needs_attention")}
    )
    (found,) = parked_truth(parked)
    assert "no once call of it is in doubt (intents without a confirm: r0:2 checked)" in str(found)


def test_a_read_confirmed_with_what_the_desk_does_not_hold_is_divergence() -> None:
    now = _support()
    calls = dict(now.calls["r0"])
    calls[0] = dataclasses.replace(calls[0], result={**(calls[0].result or {}), "email": "x@y"})
    found = no_divergence(dataclasses.replace(now, calls={"r0": calls}), [])
    assert any("read {'order_id': 'A-1001'} as" in str(v) for v in found)


def test_an_email_to_someone_the_lookup_did_not_name_is_a_history_that_never_happened() -> None:
    now = _support()
    decisions = dict(now.decisions["r0"])
    decisions[2] = dataclasses.replace(decisions[2], args={**EMAIL, "to": "eve@example.test"})
    found = no_divergence(dataclasses.replace(now, decisions={"r0": decisions}), [])
    assert any("send_email was decided with to='eve@example.test'" in str(v) for v in found)


def test_an_answer_with_two_calls_must_journal_both_under_their_ids() -> None:
    base = _snapshot()
    two = dataclasses.replace(base, answers_by_run={"r0": {1: ["call_a", "call_b"]}})
    (found,) = [v for v in no_divergence(two, _asks("journaled")) if "acted on whole" in str(v)]
    assert "model answer 1 called ['call_a', 'call_b'], the journal decided [None]" in str(found)


def test_a_call_without_its_decision_or_a_decision_without_its_answer_is_divergence() -> None:
    orphan = dataclasses.replace(_call(key="r0:1"), seq=1)
    found = no_divergence(_snapshot(calls=[_call(), orphan]), _asks("journaled"))
    assert any("step 1: calls [1] have no decision" in str(v) for v in found)
    unanswered = dataclasses.replace(_snapshot(), answers_by_run={"r0": {}})
    found = no_divergence(unanswered, _asks("journaled"))
    assert any("decisions of model answers [1] have no answer journaled" in str(v) for v in found)


def test_progress_is_drawn_on_a_terminal_only() -> None:
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    terminal, pipe = Tty(), io.StringIO()
    for stream in (terminal, pipe):
        progress = Progress("properties", stream)
        progress.finding()
        progress.update(12, 340, 56, force=True)
        progress.close()
    assert "examples 12  events 340  crashes 56  findings 1" in terminal.getvalue()
    assert pipe.getvalue() == ""


@pytest.mark.parametrize(
    ("env", "profile"),
    [
        ({}, "dev"),
        ({"CI": "true"}, "ci"),
        ({"CI": "true", "HYPOTHESIS_PROFILE": "nightly"}, "nightly"),
    ],
)
def test_the_profile_follows_the_environment(
    env: dict[str, str], profile: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.delenv("HYPOTHESIS_PROFILE", raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert active_profile() == profile


def test_an_unknown_profile_name_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HYPOTHESIS_PROFILE", "fast")
    with pytest.raises(ValueError, match="use one of dev, ci, nightly"):
        active_profile()
