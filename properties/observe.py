"""What the suite can see at one instant: the journal, the cloud's records and answers, and
the model's call counters. One :func:`snapshot` after every event feeds every invariant."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final

from agent_runtime import db

from . import sqlfile
from .remotes import CloudAnswer, CloudRow, Remotes

KIND_OF: Final = {
    "create_server": "server",
    "create_database": "database",
    "create_dns_record": "dns_record",
}


@dataclass(frozen=True, kw_only=True)
class RunRow:
    id: str
    status: str
    owner: str | None
    generation: int
    llm_calls: int
    failure: str | None
    lease_expires_at: datetime | None = None


@dataclass(frozen=True, kw_only=True)
class DecisionRow:
    seq: int
    tool: str
    args: dict[str, Any]
    llm_call: int
    generation: int


@dataclass(frozen=True, kw_only=True)
class CallRow:
    seq: int
    key: str
    state: str
    result: dict[str, Any] | None
    remote_status: str | None
    generation: int
    confirm_generation: int | None


@dataclass(frozen=True, kw_only=True)
class ClaimRow:
    run: str
    generation: int
    owner: str
    previous_owner: str | None
    lapsed: bool | None  # the previous lease had run out when it was claimed
    reason: str | None


@dataclass(frozen=True, kw_only=True)
class Snapshot:
    runs: dict[str, RunRow]
    decisions: dict[str, dict[int, DecisionRow]]
    calls: dict[str, dict[int, CallRow]]
    cloud: list[CloudRow]
    model_calls: dict[str, int]
    answers: list[CloudAnswer]
    claims: list[ClaimRow] = field(default_factory=list)

    def cloud_of(self, run: str) -> list[CloudRow]:
        return [row for row in self.cloud if row.run == run]


def snapshot(conn: db.Connection, remotes: Remotes) -> Snapshot:
    runs: dict[str, RunRow] = {}
    decisions: dict[str, dict[int, DecisionRow]] = {}
    calls: dict[str, dict[int, CallRow]] = {}
    claims: list[ClaimRow] = []
    for r in sqlfile.rows(conn, "snapshot"):
        run = r["id"]
        runs[run] = RunRow(
            id=run,
            status=r["status"],
            owner=r["owner"],
            generation=r["generation"],
            llm_calls=r["llm_calls"],
            failure=r["failure"],
            lease_expires_at=r["lease_expires_at"],
        )
        decisions[run] = {
            seq: DecisionRow(seq=seq, tool=tool, args=args, llm_call=llm_call, generation=gen)
            for seq, tool, args, llm_call, gen in r["decisions"]
        }
        calls[run] = {
            seq: CallRow(
                seq=seq,
                key=key,
                state=state,
                result=result,
                remote_status=remote,
                generation=gen,
                confirm_generation=confirm_gen,
            )
            for seq, key, state, result, remote, gen, confirm_gen in r["calls"]
        }
        claims += [
            ClaimRow(run=run, generation=g, owner=o, previous_owner=p, lapsed=lapsed, reason=why)
            for g, o, p, lapsed, why in r["claims"]
        ]
    return Snapshot(
        runs=runs,
        decisions=decisions,
        calls=calls,
        cloud=remotes.cloud_rows(),
        model_calls=remotes.all_model_calls(),
        answers=remotes.cloud_answers(),
        claims=claims,
    )
