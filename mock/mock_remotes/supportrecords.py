"""What the mock support desk holds and checks: its catalogue of orders, the arguments a
ticket and a message must carry, and the records of tickets, deliveries and answers.

The desk itself (`supportcore.Support`) acts on requests; everything here is plain data
and pure checks.
"""

from __future__ import annotations

import dataclasses
import json
import sqlite3
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final, Literal

from mock_remotes.cloudrecords import Unreadable
from mock_remotes.errors import InvalidArgs

__all__ = [
    "MESSAGE_ARGS",
    "ORDERS",
    "TICKET_ARGS",
    "Delivery",
    "DeskAnswer",
    "Operation",
    "Ticket",
    "now_iso",
    "validate_message",
    "validate_ticket",
]

Operation = Literal["lookup_order", "file_ticket", "send_email", "check_message"]

ORDERS: Final[Mapping[str, Mapping[str, Any]]] = {
    "A-1001": {
        "id": "A-1001",
        "customer": "Ada Lovelace",
        "email": "ada@example.test",
        "status": "delivered",
        "items": [{"sku": "MUG-01", "name": "Enamel mug", "quantity": 2}],
        "total": "24.00",
    },
    "A-1002": {
        "id": "A-1002",
        "customer": "Grace Hopper",
        "email": "grace@example.test",
        "status": "shipped",
        "items": [{"sku": "KBD-10", "name": "Mechanical keyboard", "quantity": 1}],
        "total": "89.00",
    },
    "B-2001": {
        "id": "B-2001",
        "customer": "Alan Turing",
        "email": "alan@example.test",
        "status": "delivered",
        "items": [
            {"sku": "LMP-03", "name": "Desk lamp", "quantity": 1},
            {"sku": "BLB-07", "name": "Spare bulb", "quantity": 2},
        ],
        "total": "41.50",
    },
}
TICKET_ARGS: Final = ("order_id", "summary")
MESSAGE_ARGS: Final = ("message_id", "to", "subject", "body")


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds")


def _exactly(what: str, args: object, names: tuple[str, ...]) -> dict[str, str]:
    """`args` if they are exactly `names`, all strings, else `InvalidArgs`."""
    if isinstance(args, Unreadable):
        raise InvalidArgs(args.detail)
    if not isinstance(args, dict):
        raise InvalidArgs(f"{what} takes a JSON object of {', '.join(names)}")
    missing = [name for name in names if name not in args]
    extra = sorted(set(args) - set(names))
    if missing or extra:
        detail = "; ".join(
            part
            for part in (
                f"missing {', '.join(missing)}" if missing else "",
                f"unexpected {', '.join(map(str, extra))}" if extra else "",
            )
            if part
        )
        raise InvalidArgs(f"{what} takes exactly {', '.join(names)}: {detail}")
    for name in names:
        if not isinstance(args[name], str):
            raise InvalidArgs(f"{what} argument {name!r} must be a string")
    return {name: args[name] for name in names}


def validate_ticket(args: object) -> dict[str, str]:
    checked = _exactly("a ticket", args, TICKET_ARGS)
    for name in TICKET_ARGS:
        if not checked[name].strip():
            raise InvalidArgs(f"ticket argument {name!r} must not be empty")
    return checked


def validate_message(args: object) -> dict[str, str]:
    checked = _exactly("a message", args, MESSAGE_ARGS)
    for name in ("message_id", "to", "subject"):
        if not checked[name].strip():
            raise InvalidArgs(f"message argument {name!r} must not be empty")
    local, at, domain = checked["to"].partition("@")
    if (
        not local
        or not at
        or not domain
        or "@" in domain
        or any(c.isspace() for c in checked["to"])
    ):
        raise InvalidArgs(f"message argument 'to' must be one address, got {checked['to']!r}")
    return checked


@dataclass(frozen=True, kw_only=True)
class Ticket:
    """One ticket filed, under the key that filed it."""

    key: str
    id: str
    args: dict[str, str]
    result: dict[str, Any]  # the first answer; "status" is "created"
    created_at: str

    @classmethod
    def from_row(cls, row: sqlite3.Row) -> Ticket:
        return cls(
            key=row["key"],
            id=row["id"],
            args=json.loads(row["args"]),
            result=json.loads(row["result"]),
            created_at=row["created_at"],
        )

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass(frozen=True, kw_only=True)
class Delivery:
    """One email delivered (a message sent twice is two deliveries)."""

    id: str  # M-0000001, one per delivery
    message_id: str
    to: str
    subject: str
    body: str
    delivered_at: str

    @classmethod
    def from_row(cls, row: sqlite3.Row) -> Delivery:
        return cls(
            id=row["id"],
            message_id=row["message_id"],
            to=row["recipient"],
            subject=row["subject"],
            body=row["body"],
            delivered_at=row["delivered_at"],
        )

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass(frozen=True, kw_only=True)
class DeskAnswer:
    """What the desk answered one request to an operation, in order."""

    seq: int
    op: Operation
    ref: str  # the order id, Idempotency-Key or message_id
    answer: str  # found, created, already_done, delivered, present, absent, or an error code
    dropped: bool  # drop_after lost it: the client never saw it
    generation: int | None = None  # the request's fencing generation, if it sent one

    @classmethod
    def from_row(cls, row: sqlite3.Row) -> DeskAnswer:
        return cls(
            seq=row["seq"],
            op=row["op"],
            ref=row["ref"],
            answer=row["answer"],
            dropped=bool(row["dropped"]),
            generation=row["generation"],
        )

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)
