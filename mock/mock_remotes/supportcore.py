"""The mock support desk: orders to look up, tickets to file, a mailbox to send through.

It serves the example support agent, one remote per effect contract:

- `order(order_id)`: a fixed catalogue (`ORDERS`), read-only (`read`);
- `file_ticket(key, args)`: behind an idempotency key, with the cloud's rules
  (first time 201 `created`; the same key and arguments again 200 with the
  stored first answer marked `already_done`; other arguments 409 key_conflict):
  `keyed`;
- `send(args)`: delivers an email under the sender's `message_id`, with no
  idempotency at all: sending twice delivers twice. `check(message_id)` answers
  whether a message was delivered, which is what makes a send `checked`.

State lives in one SQLite file (`SqliteStore`): tickets, deliveries, id counters,
and a log of every answer the desk gave (`answers`): a lookup, a ticket, a send,
a check, or the refusal of one. Knobs (`SupportFaults`) act on tickets and sends
only, like the cloud's on its creates: `fail_before` refuses with 500 before
acting, `drop_after` acts, commits, then loses the answer, `latency` waits first,
`send_latency` makes a send alone wait first (the request acts after its sender gave up);
`fail_lookups` alone acts on order lookups: the next n answer 500 (a read's outage).
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Callable, Mapping
from typing import Any, Literal

from mock_remotes._store import SqliteStore, Synchronous
from mock_remotes.cloudrecords import Outcome, run_of
from mock_remotes.errors import (
    Forgotten,
    InjectedFailure,
    KeyConflict,
    MissingIdempotencyKey,
    MockError,
    UnknownOrder,
)
from mock_remotes.faults import SupportFaults, taken, updated
from mock_remotes.inflight import Held, Holding
from mock_remotes.supportrecords import (
    ORDERS,
    Delivery,
    DeskAnswer,
    Operation,
    Ticket,
    now_iso,
    validate_message,
    validate_ticket,
)

__all__ = ["ORDERS", "Delivery", "DeskAnswer", "Operation", "Support", "Ticket"]

logger = logging.getLogger(__name__)


class Support(SqliteStore):
    """The mock support desk over one SQLite file; safe to share between threads."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        latency: float = 0.0,
        synchronous: Synchronous = "FULL",
    ) -> None:
        """Open (or create) the desk's store at `path` (see `Cloud` for `synchronous`).

        `latency` (seconds) is the baseline of the latency knob, restored by `reset()`.
        """
        super().__init__(path, "support.sql", synchronous)
        self._baseline = updated(SupportFaults(), {"latency": latency})
        self.holding = Holding()  # requests received and not acted on yet (hold_next)
        self._faults = self._baseline
        self._epoch = 0  # resets so far: a request waiting out its latency acts in its own
        logger.info("mock support store=%s synchronous=%s", self.path, synchronous)

    # -- knobs and lifecycle -----------------------------------------------------------

    @property
    def faults(self) -> SupportFaults:
        return self._faults

    def set_faults(self, changes: Mapping[str, Any] | None = None, **more: Any) -> SupportFaults:
        """Replace the given knobs (`fail_before`, `drop_after`, `latency`, `hang`)."""
        with self._lock:
            self._faults = updated(self._faults, {**(changes or {}), **more})
            logger.info("mock support faults %s", self._faults)
            return self._faults

    def reset(self) -> None:
        """Forget everything: tickets, deliveries, counters, the answer log, faults."""
        with self._lock:
            self._db.executescript(self._sql["reset"])
            self._faults = self._baseline
            self._epoch += 1  # a request waiting out its latency now never acts
        self.holding.forget()
        logger.info("mock support reset store=%s", self.path)

    # -- reads that are operations (logged) ------------------------------------------------

    def order(self, order_id: str, *, generation: int | None = None) -> dict[str, Any]:
        """The order `order_id` from the catalogue, else `UnknownOrder`."""
        order = ORDERS.get(order_id)
        with self._lock, self._transaction():
            self._faults, fail = taken(self._faults, "fail_lookups")
            found = InjectedFailure.code if fail else "found" if order else UnknownOrder.code
            self._answered("lookup_order", order_id, found, generation=generation)
        if fail:
            raise InjectedFailure("fail_lookups knob: the lookup failed")
        if order is None:
            known = ", ".join(ORDERS)
            raise UnknownOrder(f"no order {order_id!r}; the catalogue holds {known}")
        copy: dict[str, Any] = json.loads(json.dumps(order))  # the caller may change it
        return copy

    def check(self, message_id: str, *, generation: int | None = None) -> dict[str, Any]:
        """Whether `message_id` was delivered, how often, and its first delivery (or None)."""
        with self._lock, self._transaction():
            rows = self._all("deliveries_of_message", message_id=message_id)
            seen = "present" if rows else "absent"
            self._answered("check_message", message_id, seen, generation=generation)
        first = Delivery.from_row(rows[0]).to_json() if rows else None
        return {
            "message_id": message_id,
            "delivered": bool(rows),
            "deliveries": len(rows),
            "first": first,
        }

    # -- the two operations that act ---------------------------------------------------

    def file_ticket(
        self,
        key: str | None,
        args: object,
        *,
        wait: Callable[[float], None] = time.sleep,
        generation: int | None = None,
    ) -> Outcome:
        """File a ticket under idempotency `key`; every refusal raises a `MockError`.
        `generation` (the sender's fencing generation) is logged with the answer only."""
        if not key:
            raise MissingIdempotencyKey("send an Idempotency-Key header, e.g. 'run42:3'")
        return self._act(
            "file_ticket", key, lambda: self._ticket(key, validate_ticket(args)), wait, generation
        )

    def send(
        self,
        args: object,
        *,
        wait: Callable[[float], None] = time.sleep,
        generation: int | None = None,
    ) -> Outcome:
        """Deliver an email; the same `message_id` sent again is delivered again."""
        ref = args.get("message_id") if isinstance(args, dict) else None
        ref = ref if isinstance(ref, str) else ""
        return self._act(
            "send_email", ref, lambda: self._deliver(validate_message(args)), wait, generation
        )

    def _act(
        self,
        op: Operation,
        ref: str,
        apply: Callable[[], Outcome],
        wait: Callable[[float], None],
        generation: int | None,
    ) -> Outcome:
        latency = self._faults.latency + (self._faults.send_latency if op == "send_email" else 0)
        epoch = self._epoch
        if latency > 0:
            wait(latency)
        with self._lock:
            if self._epoch != epoch:
                raise Forgotten(f"the desk was reset while {op} {ref} waited out its latency")
            self._faults, hold = taken(self._faults, "hold_next")
            self._faults, fail = (
                (self._faults, False) if hold else taken(self._faults, "fail_before")
            )
            with self._transaction():
                if hold:  # received; it acts at a landing, or never
                    self._answered(op, ref, Held.code, generation=generation)
                    raise self.holding.hold(
                        op, ref, generation, lambda: self._land(op, ref, apply, generation)
                    )
                try:
                    if fail:
                        raise InjectedFailure("fail_before knob: refused before acting")
                    outcome = apply()
                except MockError as exc:
                    self._answered(op, ref, exc.code, generation=generation)
                    raise
                self._faults, drop = taken(self._faults, "drop_after")
                status = outcome.body["status"]
                self._answered(op, ref, status, dropped=drop, generation=generation)
        if drop:
            logger.info("mock support drops the answer op=%s ref=%s", op, ref)
            return Outcome(status=outcome.status, body=outcome.body, hold=self._faults.hang)
        return outcome

    def _land(
        self, op: Operation, ref: str, apply: Callable[[], Outcome], generation: int | None
    ) -> str:
        """Act on a held request now; its answer is logged as dropped (nobody hears it)."""
        with self._lock, self._transaction():
            try:
                answer: str = apply().body["status"]
            except MockError as exc:
                answer = exc.code
            self._answered(op, ref, answer, dropped=True, generation=generation)
        logger.info("mock support landed a held request op=%s ref=%s answer=%s", op, ref, answer)
        return answer

    def _ticket(self, key: str, args: dict[str, str]) -> Outcome:
        row = self._one("ticket_get", key=key)
        if row is not None:
            ticket = Ticket.from_row(row)
            if ticket.args != args:
                raise KeyConflict(
                    f"key {key!r} already filed {ticket.id} with "
                    f"{json.dumps(ticket.args, sort_keys=True)}; "
                    f"now {json.dumps(args, sort_keys=True)}"
                )
            return Outcome(status=200, body={**ticket.result, "status": "already_done"})
        ticket_id = f"T-{self._next('ticket'):07d}"
        result = {"id": ticket_id, "status": "created", **args}
        self._run(
            "ticket_insert",
            key=key,
            run=run_of(key),
            id=ticket_id,
            args=json.dumps(args, sort_keys=True),
            result=json.dumps(result),
            created_at=now_iso(),
        )
        logger.info("mock support filed %s key=%s", ticket_id, key)
        return Outcome(status=201, body=result)

    def _deliver(self, args: dict[str, str]) -> Outcome:
        delivery = Delivery(
            id=f"M-{self._next('message'):07d}",
            message_id=args["message_id"],
            to=args["to"],
            subject=args["subject"],
            body=args["body"],
            delivered_at=now_iso(),
        )
        self._run(
            "delivery_insert",
            id=delivery.id,
            message_id=delivery.message_id,
            run=run_of(delivery.message_id),
            recipient=delivery.to,
            subject=delivery.subject,
            body=delivery.body,
            delivered_at=delivery.delivered_at,
        )
        logger.info("mock support delivered %s message_id=%s", delivery.id, delivery.message_id)
        return Outcome(status=201, body={**delivery.to_json(), "status": "delivered"})

    # -- reads for tests (not logged) -------------------------------------------------------

    def tickets(self, run: str | None = None) -> list[Ticket]:
        """Every ticket in filing order, or only those whose key belongs to `run`."""
        with self._lock:
            rows = self._all("tickets_all") if run is None else self._all("tickets_of_run", run=run)
        return [Ticket.from_row(row) for row in rows]

    def deliveries(
        self, *, message_id: str | None = None, run: str | None = None
    ) -> list[Delivery]:
        """Every delivery in order; or those of one `message_id`, or of one `run`."""
        with self._lock:
            if message_id is not None:
                rows = self._all("deliveries_of_message", message_id=message_id)
            elif run is not None:
                rows = self._all("deliveries_of_run", run=run)
            else:
                rows = self._all("deliveries_all")
        return [Delivery.from_row(row) for row in rows]

    def answers(self, *, op: str | None = None, ref: str | None = None) -> list[DeskAnswer]:
        """What the desk answered every operation request, in order (filtered by op, ref)."""
        with self._lock:
            found = [DeskAnswer.from_row(row) for row in self._all("answers_all")]
        return [a for a in found if op in (None, a.op) and ref in (None, a.ref)]

    # -- plumbing (callers hold the lock) -------------------------------------------------

    def _next(self, kind: Literal["ticket", "message"]) -> int:
        row = self._one("counter_next", kind=kind)
        assert row is not None
        return int(row[0])

    def _answered(
        self,
        op: Operation,
        ref: str,
        answer: str,
        *,
        dropped: bool = False,
        generation: int | None = None,
    ) -> None:
        self._run(
            "answer_insert",
            op=op,
            ref=ref,
            answer=answer,
            dropped=int(dropped),
            generation=generation,
        )
