"""``fenced_act`` for reads (:mod:`properties.reads`): a read is told to its sender by who ran."""

from __future__ import annotations

from dataclasses import dataclass

from .reads import Read, desk_reads, fenced_reads


@dataclass
class Rec:
    label: str
    run: str
    generation: int | None
    fenced_after: dict[str, int] | None = None


LOG = [
    {"seq": 1, "op": "lookup_order", "ref": "A-1001", "answer": "found", "generation": 1},
    {"seq": 2, "op": "file_ticket", "ref": "r0:1", "answer": "created", "generation": 1},
    {"seq": 3, "op": "lookup_order", "ref": "A-1001", "answer": "found", "generation": 1},
    {"seq": 4, "op": "check_message", "ref": "r0:2", "answer": "absent", "generation": 2},
]


def test_the_desks_reads_are_its_lookups_in_log_order() -> None:
    assert desk_reads(LOG) == [
        Read(remote="desk", seq=1, ref="A-1001", generation=1, answer="found"),
        Read(remote="desk", seq=3, ref="A-1001", generation=1, answer="found"),
    ]


def test_a_read_after_the_heartbeat_fenced_its_only_possible_sender_is_fenced_act() -> None:
    w1 = Rec("w1", "r0", 1, fenced_after={"desk": 2})
    w2 = Rec("w2", "r0", 2)
    (found,) = fenced_reads(desk_reads(LOG), [w1, w2])
    assert found.kind == "fenced_act" and found.run == "r0"
    assert found.message.startswith("w1 (generation 1) read A-1001 from the desk (answered found)")


def test_a_read_another_worker_of_its_generation_may_have_sent_is_not_judged() -> None:
    w1 = Rec("w1", "r0", 1, fenced_after={"desk": 2})
    other = Rec("w3", "r1", 1)  # another run's worker, also of generation 1, ran meanwhile
    assert fenced_reads(desk_reads(LOG), [w1, other]) == []
    fenced_too = Rec("w3", "r1", 1, fenced_after={})  # fenced before anything was logged
    (found,) = fenced_reads(desk_reads(LOG), [w1, fenced_too])
    assert "w1 or w3 (generation 1) read A-1001" in found.message


def test_nobody_who_ran_or_a_read_before_the_fence_is_no_violation() -> None:
    w1 = Rec("w1", "r0", 1, fenced_after={"desk": 3})
    assert fenced_reads(desk_reads(LOG), [w1]) == []
    assert fenced_reads(desk_reads(LOG), []) == []
