"""Requests a remote has received and not acted on yet: a request in flight.

A real remote can act on a request long after its sender gave up on it: the caller timed
out, its process died, a gateway answered 504 while the backend went on working. The
`hold_next` knob of the cloud and the support desk makes that happen on purpose: the next
n requests that would act are received, counted and answered `504 held` (the sender cannot
know whether they will act), and they act only when someone calls `land` -- after the
sender crashed, retried, checked, or was fenced, whenever a test or a schedule says. What
a landing answers is logged like any answer, marked dropped: nobody hears it. `forget`
drops a held request for good (what a remote that keeps the `in_flight` promise does once
the bound has passed: it never acts).
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from mock_remotes._wire import Call, Reply, Router
from mock_remotes.errors import InvalidRequest, MockError

__all__ = ["Held", "HeldRequest", "Holding", "holding_routes"]


class Held(MockError):
    status = 504
    code = "held"


@dataclass(frozen=True, kw_only=True)
class HeldRequest:
    """One request received and not acted on yet."""

    id: int  # the remote's own number for it, in arrival order
    op: str  # create_server, ..., file_ticket, send_email
    ref: str  # its idempotency key, or the message id of a send
    generation: int | None  # the sender's fencing generation

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "op": self.op, "ref": self.ref, "generation": self.generation}


class Holding:
    """The held requests of one remote, each with what acting on it does."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._numbers = itertools.count(1)
        self._held: dict[int, tuple[HeldRequest, Callable[[], str]]] = {}

    def hold(self, op: str, ref: str, generation: int | None, act: Callable[[], str]) -> Held:
        """Keep the request (``act`` acts on it and returns what it answered); the error
        its sender gets instead of an answer."""
        with self._lock:
            request = HeldRequest(id=next(self._numbers), op=op, ref=ref, generation=generation)
            self._held[request.id] = (request, act)
        return Held(f"request {request.id} ({op} {ref}) is held: it may act later, or never")

    def held(self) -> list[HeldRequest]:
        with self._lock:
            return [request for request, _ in self._held.values()]

    def land(self, ids: Iterable[int] | None = None) -> list[dict[str, Any]]:
        """Act on the given held requests now (default: the oldest one), in arrival order;
        what each answered."""
        with self._lock:
            chosen = sorted(self._held) if ids is not None else sorted(self._held)[:1]
            wanted = set(ids) if ids is not None else set(chosen)
            taken = [self._held.pop(i) for i in chosen if i in wanted]
        return [{**request.to_json(), "answer": act()} for request, act in taken]

    def forget(self, ids: Iterable[int] | None = None) -> list[HeldRequest]:
        """Drop held requests for good (default: all): they never act."""
        with self._lock:
            chosen = list(self._held) if ids is None else [i for i in ids if i in self._held]
            return [self._held.pop(i)[0] for i in chosen]


def holding_routes(router: Router, holding: Holding) -> None:
    """``GET /admin/held``, ``POST /admin/land`` (``{"ids": [...]}``, default the oldest)
    and ``POST /admin/forget`` (``{"ids": [...]}``, default all) on ``router``."""

    def ids_of(call: Call) -> list[int] | None:
        try:
            body = call.json() if call.body.strip() else {}
        except ValueError as exc:
            raise InvalidRequest(f"body is not JSON: {exc}") from exc
        ids = body.get("ids") if isinstance(body, dict) else None
        if ids is None:
            return None
        if not isinstance(ids, list) or not all(
            isinstance(i, int) and not isinstance(i, bool) for i in ids
        ):
            raise InvalidRequest(f"ids must be a list of whole numbers, got {ids!r}")
        return ids

    @router.route("GET", "/admin/held")
    def held(call: Call, params: Mapping[str, str]) -> Reply:
        """The requests received and not acted on yet, oldest first."""
        return Reply.of(200, {"held": [r.to_json() for r in holding.held()]})

    @router.route("POST", "/admin/land")
    def land(call: Call, params: Mapping[str, str]) -> Reply:
        """Act on held requests now (default: the oldest); what each answered."""
        return Reply.of(200, {"landed": holding.land(ids_of(call))})

    @router.route("POST", "/admin/forget")
    def forget(call: Call, params: Mapping[str, str]) -> Reply:
        """Drop held requests for good (default: all): they never act."""
        return Reply.of(200, {"forgotten": [r.to_json() for r in holding.forget(ids_of(call))]})
