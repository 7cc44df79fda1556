"""The durability table is one: the runtime's SQL, ARCHITECTURE.md and the shadow agree on
which writes a database crash may take back, and the shadow excuses nothing durable."""

from __future__ import annotations

import re
from pathlib import Path

from agent_runtime.store.journal import confirm_commit
from agent_runtime.store.queries import runtime_queries

from . import durability
from .observe import CallRow, DecisionRow, RunRow, Snapshot
from .shadow import Shadow

ARCHITECTURE = Path(__file__).resolve().parent.parent / "ARCHITECTURE.md"
SECTION = "## What a database crash can lose"
# Named statements that write but are not the runtime's: why each is left out.
NOT_THE_RUNTIMES = {
    "delete_all_runs": "the test suites' reset; the runtime never runs it",
    "clock_set_skew": "the clock seam, set by tests between examples",
    "clock_freeze": "the clock seam, set by tests between examples",
    "clock_thaw": "the clock seam, set by tests between examples",
}
WRITE = re.compile(r"\b(INSERT|UPDATE|DELETE)\b")
RELAXES = "set_config('synchronous_commit', 'off', true)"
RELAXES_BY_PARAMETER = "set_config('synchronous_commit', %(commit)s, true)"


def _doc_rows() -> list[list[str]]:
    text = ARCHITECTURE.read_text()
    section = text[text.index(SECTION) :]
    section = section[: section.index("\n## ", len(SECTION))]
    lines = [ln for ln in section.splitlines() if ln.startswith("|")]
    return [[c.strip() for c in ln.strip().strip("|").split("|")] for ln in lines]


def test_architecture_shows_the_durability_table_the_shadow_derives_its_rules_from() -> None:
    expected = [
        [c.strip() for c in ln.strip("|").split("|")] for ln in durability.markdown().splitlines()
    ]
    assert _doc_rows() == expected, (
        f"ARCHITECTURE.md, {SECTION!r}, must show properties/durability.py's table:\n"
        + durability.markdown()
    )


def test_the_durability_table_names_every_write_of_the_runtime_with_its_commit() -> None:
    queries = runtime_queries()
    writes = {name for name in queries if WRITE.search(queries.text(name))}
    tabled = {w.statement for w in durability.WRITES}
    assert tabled == writes - NOT_THE_RUNTIMES.keys()
    for w in durability.WRITES:
        text = queries.text(w.statement)
        for effect in w.effects:
            if RELAXES in text:
                commit = "off"
            elif RELAXES_BY_PARAMETER in text:  # record_confirm: the journal chooses
                commit = confirm_commit(effect)
            else:
                commit = "on"  # the server's default, which the runtime relies on
            expected = durability.RELAXED if commit == "off" else durability.DURABLE
            assert w.commit == expected, f"{w.statement} ({effect}) commits {commit}"


def _run(status: str = "running", owner: str | None = "w1", generation: int = 1) -> RunRow:
    return RunRow(
        id="r0", status=status, owner=owner, generation=generation, llm_calls=1, failure=None
    )


def _call(seq: int, state: str, effect: str) -> CallRow:
    confirmed = state == "confirmed"
    return CallRow(
        seq=seq,
        key=f"r0:{seq}",
        state=state,
        result={"id": "m-1"} if confirmed else None,
        remote_status="created" if confirmed else None,
        generation=1,
        confirm_generation=1 if confirmed else None,
        effect=effect,
    )


def _snapshot(run: RunRow, calls: list[CallRow], *, other_run: bool = False) -> Snapshot:
    runs = {"r0": run}
    if other_run:
        runs["r1"] = RunRow(
            id="r1", status="pending", owner=None, generation=0, llm_calls=0, failure=None
        )
    decisions = {
        c.seq: DecisionRow(seq=c.seq, tool="send_email", args={}, llm_call=c.seq + 1, generation=1)
        for c in calls
    }
    return Snapshot(
        runs=runs,
        decisions={"r0": decisions},
        calls={"r0": {c.seq: c for c in calls}},
        effects=[],
        model_calls={},
        answers=[],
    )


def _after_crash(before: Snapshot, after: Snapshot, *, between: Snapshot | None = None) -> str:
    shadow = Shadow()
    assert shadow.check_and_update(before, {}) == []
    if between is not None:
        assert shadow.check_and_update(between, {}) == []
    shadow.database_crashed()
    return " / ".join(str(v) for v in shadow.check_and_update(after, {}))


def test_a_database_crash_never_takes_back_what_the_table_calls_durable() -> None:
    # a relaxed confirm, nothing durable after it: it may revert (its contract re-sends)
    keyed = [_call(0, "confirmed", "keyed")]
    assert (
        _after_crash(_snapshot(_run(), keyed), _snapshot(_run(), [_call(0, "intent", "keyed")]))
        == ""
    )
    # the same confirm, once another run's durable write was seen after it: flushed
    found = _after_crash(
        _snapshot(_run(), keyed),
        _snapshot(_run(), [_call(0, "intent", "keyed")], other_run=True),
        between=_snapshot(_run(), keyed, other_run=True),
    )
    assert "a durable write seen after it had flushed it" in found
    # a once call's confirm commits durably
    once = [_call(0, "confirmed", "once")]
    found = _after_crash(_snapshot(_run(), once), _snapshot(_run(), [_call(0, "intent", "once")]))
    assert "a `once` call's confirm" in found and "it commits durably" in found
    # a park is durable: the run may not come back running
    intent = [_call(0, "intent", "once")]
    found = _after_crash(
        _snapshot(_run(), intent),
        _snapshot(_run(), intent),
        between=_snapshot(_run("needs_attention", None), intent),
    )
    assert "a park (needs attention) (`park_run`, a durable write) was lost" in found


def test_a_refused_call_goes_with_the_answer_that_refused_it() -> None:
    """A call the runtime refused (an unknown tool) is written with its answer by the one
    relaxed ``record_decision``: a database crash before any durable write may take both,
    and its row is no intent that would have flushed them. Seen in a nightly round: an
    unknown tool at step 0, the worker killed asking for step 1, then the crash."""
    refused = CallRow(
        seq=0, key="r0:0", state="failed", result={"error": "unknown_tool"},
        remote_status="rejected", generation=1, confirm_generation=1, effect="read",
    )  # fmt: skip
    before = _snapshot(_run(), [refused])
    after = _snapshot(_run(), [])
    after.decisions["r0"].clear()

    assert _after_crash(before, after) == ""
    # a refused call is no excuse for losing an intent written after it
    intent = _call(1, "intent", "keyed")
    found = _after_crash(_snapshot(_run(), [refused, intent]), after)
    assert "is gone after a database crash" in found
