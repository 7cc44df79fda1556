"""The mock support desk's HTTP contract, as one route table over a `Support`.

GET  /v1/orders                          the catalogue
GET  /v1/orders/{order_id}               one order (404 unknown_order)
POST /v1/tickets                         file a ticket (Idempotency-Key required)
GET  /v1/tickets[?run=<run_id>]          every ticket
POST /v1/messages                        send an email (no idempotency: twice is twice)
GET  /v1/messages[?message_id=|run=]     every delivery
GET  /v1/messages/{message_id}           the check: was it delivered?
GET  /v1/answers[?op=&ref=]              every operation's answer, in order
GET  /admin/faults    POST /admin/faults    POST /admin/reset
GET  /healthz
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from mock_remotes._wire import Call, Reply, Router
from mock_remotes.cloudrecords import Unreadable
from mock_remotes.cloudroutes import fencing_generation
from mock_remotes.errors import InvalidRequest, MissingIdempotencyKey
from mock_remotes.inflight import holding_routes
from mock_remotes.supportcore import ORDERS, Support

__all__ = ["support_router"]

KEY_HEADER = "Idempotency-Key"


def _args(call: Call) -> object:
    try:
        return call.json()
    except ValueError as exc:
        return Unreadable(f"body is not JSON: {exc}")


def support_router(support: Support) -> Router:
    """The route table serving `support`; used by the FastAPI app and the transport."""
    router = Router()

    @router.route("GET", "/v1/orders")
    def orders(call: Call, params: Mapping[str, str]) -> Reply:
        """The whole catalogue of orders (not logged)."""
        return Reply.of(200, {"orders": list(ORDERS.values())})

    @router.route("GET", "/v1/orders/{order_id}")
    def order(call: Call, params: Mapping[str, str]) -> Reply:
        """One order, with its customer's email and items (404 if unknown)."""
        order = support.order(params["order_id"], generation=fencing_generation(call))
        return Reply.of(200, order)

    @router.route("POST", "/v1/tickets")
    def file_ticket(call: Call, params: Mapping[str, str]) -> Reply:
        """File a ticket under the Idempotency-Key (201, or 200 already_done)."""
        key = (call.header(KEY_HEADER) or "").strip()
        if not key:
            raise MissingIdempotencyKey(f"send an {KEY_HEADER} header, e.g. 'run42:3'")
        outcome = support.file_ticket(
            key, _args(call), wait=call.wait, generation=fencing_generation(call)
        )
        return Reply.of(outcome.status, outcome.body, hold=outcome.hold)

    @router.route("GET", "/v1/tickets")
    def tickets(call: Call, params: Mapping[str, str]) -> Reply:
        """Every ticket filed, optionally of one run (?run=<run_id>)."""
        found = support.tickets(call.query.get("run") or None)
        return Reply.of(200, {"total": len(found), "tickets": [t.to_json() for t in found]})

    @router.route("POST", "/v1/messages")
    def send(call: Call, params: Mapping[str, str]) -> Reply:
        """Deliver an email under its message_id; sending again delivers again."""
        outcome = support.send(_args(call), wait=call.wait, generation=fencing_generation(call))
        return Reply.of(outcome.status, outcome.body, hold=outcome.hold)

    @router.route("GET", "/v1/messages")
    def deliveries(call: Call, params: Mapping[str, str]) -> Reply:
        """Every delivery in order (?message_id= or ?run= narrows it)."""
        found = support.deliveries(
            message_id=call.query.get("message_id") or None, run=call.query.get("run") or None
        )
        return Reply.of(200, {"total": len(found), "messages": [d.to_json() for d in found]})

    @router.route("GET", "/v1/messages/{message_id:path}")
    def check(call: Call, params: Mapping[str, str]) -> Reply:
        """Whether a message_id was delivered, how often, and its first delivery."""
        found = support.check(params["message_id"], generation=fencing_generation(call))
        return Reply.of(200, found)

    @router.route("GET", "/v1/answers")
    def answers(call: Call, params: Mapping[str, str]) -> Reply:
        """What the desk answered every operation request, in order (?op=, ?ref=)."""
        found = support.answers(op=call.query.get("op") or None, ref=call.query.get("ref") or None)
        return Reply.of(200, {"answers": [a.to_json() for a in found]})

    @router.route("GET", "/admin/faults")
    def get_faults(call: Call, params: Mapping[str, str]) -> Reply:
        """The current fault and latency knobs."""
        return Reply.of(200, dataclasses.asdict(support.faults))

    @router.route("POST", "/admin/faults")
    def set_faults(call: Call, params: Mapping[str, str]) -> Reply:
        """Replace the given knobs: fail_before, drop_after, latency, hang."""
        try:
            body = call.json() if call.body.strip() else {}
        except ValueError as exc:
            raise InvalidRequest(f"body is not JSON: {exc}") from exc
        if not isinstance(body, dict):
            raise InvalidRequest("faults must be a JSON object")
        return Reply.of(200, dataclasses.asdict(support.set_faults(body)))

    @router.route("POST", "/admin/reset")
    def reset(call: Call, params: Mapping[str, str]) -> Reply:
        """Forget everything: tickets, deliveries, counters, the answer log, faults."""
        support.reset()
        return Reply.of(200, {"reset": True})

    @router.route("GET", "/healthz")
    def healthz(call: Call, params: Mapping[str, str]) -> Reply:
        """Liveness."""
        return Reply.of(200, {"ok": True, "service": "mock-support"})

    holding_routes(router, support.holding)
    return router
