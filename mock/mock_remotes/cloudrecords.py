"""What the mock cloud keeps and checks: its kinds of resource, each kind's arguments, the
record of a created resource, the log of its answers, and what a submit answers.

The store itself (`cloudcore.Cloud`) acts on requests; everything here is plain data and
pure checks, shared with the support desk (`run_of`, `Unreadable`, `Outcome`).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal, get_args

from mock_remotes.errors import InvalidArgs

__all__ = [
    "KINDS",
    "PLURAL",
    "Answer",
    "CloudRecord",
    "Kind",
    "Outcome",
    "Unreadable",
    "run_of",
    "validate_args",
]

Kind = Literal["server", "database", "dns_record"]
KINDS: Final[tuple[Kind, ...]] = get_args(Kind)

PLURAL: Final[dict[Kind, str]] = {
    "server": "servers",
    "database": "databases",
    "dns_record": "dns_records",
}
_PREFIX: Final[dict[Kind, str]] = {"server": "i", "database": "db", "dns_record": "dns"}
# Each kind's arguments: name -> allowed values (None: any non-empty string).
_ARGS: Final[dict[Kind, dict[str, tuple[str, ...] | None]]] = {
    "server": {"name": None, "size": ("small", "medium", "large"), "region": None},
    "database": {"name": None, "engine": ("postgres", "mysql"), "server_id": None},
    "dns_record": {"name": None, "type": ("A", "CNAME"), "value": None},
}


def run_of(key: str) -> str:
    """The run an idempotency key belongs to: `"run42:3"` -> `"run42"`."""
    return key.rsplit(":", 1)[0]


@dataclass(frozen=True)
class Unreadable:
    """Stands in for a request body that is not JSON; `validate_args` refuses it."""

    detail: str


def validate_args(kind: Kind, args: object) -> dict[str, str]:
    """`args` if they are exactly the arguments `kind` takes, else `InvalidArgs`."""
    spec = _ARGS[kind]
    if isinstance(args, Unreadable):
        raise InvalidArgs(args.detail)
    if not isinstance(args, dict):
        raise InvalidArgs(f"{kind} arguments must be a JSON object, got {type(args).__name__}")
    missing = sorted(set(spec) - set(args))
    extra = sorted(set(args) - set(spec))
    if missing or extra:
        parts = [f"missing {', '.join(missing)}" if missing else ""]
        parts.append(f"unexpected {', '.join(map(str, extra))}" if extra else "")
        detail = "; ".join(p for p in parts if p)
        raise InvalidArgs(f"{kind} takes exactly {', '.join(spec)}: {detail}")
    for name, allowed in spec.items():
        value = args[name]
        if not isinstance(value, str) or not value:
            raise InvalidArgs(f"{kind} argument {name!r} must be a non-empty string")
        if allowed is not None and value not in allowed:
            raise InvalidArgs(
                f"{kind} argument {name!r} must be one of {', '.join(allowed)}, got {value!r}"
            )
    return {name: args[name] for name in spec}


def created_body(kind: Kind, number: int, args: Mapping[str, str]) -> dict[str, Any]:
    result: dict[str, Any] = {"id": f"{_PREFIX[kind]}-{number:07d}", "kind": kind}
    result["status"] = "created"
    result.update(args)
    if kind == "server":
        high, low = divmod(number, 256)
        result["ip"] = f"10.0.{high % 256}.{low}"
    return result


def count_by_kind(records: list[CloudRecord]) -> dict[str, int]:
    counts = dict.fromkeys(PLURAL.values(), 0)
    for record in records:
        counts[PLURAL[record.kind]] += 1
    return counts


@dataclass(frozen=True, kw_only=True)
class CloudRecord:
    """One key the cloud acted on, and what it answered the first time."""

    key: str
    kind: Kind
    id: str
    args: dict[str, Any]
    result: dict[str, Any]  # the first answer; "status" is "created"
    generation: int | None  # X-Fencing-Generation of the request that acted
    created_at: str  # ISO 8601, UTC

    @classmethod
    def from_row(cls, row: sqlite3.Row) -> CloudRecord:
        return cls(
            key=row["key"],
            kind=row["kind"],
            id=row["id"],
            args=json.loads(row["args"]),
            result=json.loads(row["result"]),
            generation=row["generation"],
            created_at=row["created_at"],
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "kind": self.kind,
            "id": self.id,
            "args": self.args,
            "result": self.result,
            "generation": self.generation,
            "created_at": self.created_at,
        }


@dataclass(frozen=True, kw_only=True)
class Answer:
    """What the cloud answered one mutating request: the truth behind ``remote_status``."""

    seq: int  # answer order, across keys
    key: str
    generation: int | None  # the request's X-Fencing-Generation
    answer: str  # 'created', 'already_done', or the refusal's error code
    dropped: bool  # drop_after lost it: the client never saw it

    @classmethod
    def from_row(cls, row: sqlite3.Row) -> Answer:
        return cls(
            seq=row["seq"],
            key=row["key"],
            generation=row["generation"],
            answer=row["answer"],
            dropped=bool(row["dropped"]),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "seq": self.seq,
            "key": self.key,
            "generation": self.generation,
            "answer": self.answer,
            "dropped": self.dropped,
        }


@dataclass(frozen=True, kw_only=True)
class Outcome:
    """What a successful `Cloud.submit` answers."""

    status: int  # 201 created, 200 already_done
    body: dict[str, Any]
    hold: float | None = None  # set when drop_after took this answer: seconds to hold it

    @property
    def dropped(self) -> bool:
        return self.hold is not None
