"""The mock model's plans: what a run does next, read from the steps it confirmed.

A plan knows nothing of HTTP. Given a run's `Context` (its confirmed steps, the
failed ones, what the user wrote), `Plan.next` returns a `Move`: the tools it
calls next, or none for a final answer. Everything a request could get wrong is
checked there, before the model counts the call; only then does
`Move.render(n)` name things after the call count `n` (`srv-<n>`, `#<n>`).

Plans, by the model name that selects them on `/v1/chat/completions`:

- `mock-provisioner`: a server, then a database on it, then a DNS record
  pointing at it, one tool call at a time, then a final text. `/v1/decide`
  always follows this plan (its final answer is the tool `done`);
- `mock-provisioner-parallel`: the same, but the database and the DNS record
  come together in one answer once the server exists;
- `mock-support`: the user names an order (`A-1001`); look it up, file a ticket
  about it, email the customer, then a final text;
- `mock-support-parallel`: the same, but the lookup and the ticket (which needs only
  the order's id) come together in the first answer: several calls at step 0.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from mock_remotes.errors import InvalidRequest

__all__ = [
    "PLANS",
    "PROVISIONER",
    "Context",
    "Move",
    "Plan",
    "Step",
    "ToolCall",
    "Turn",
]


@dataclass(frozen=True, kw_only=True)
class Step:
    """One confirmed step of a run's history, as the runtime sends it."""

    seq: int
    tool: str
    args: dict[str, Any]
    result: dict[str, Any]

    @classmethod
    def from_json(cls, obj: object, index: int = 0) -> Step:
        where = f"history[{index}]"
        if not isinstance(obj, dict):
            raise InvalidRequest(f"{where} must be an object with seq, tool, args, result")
        seq, tool, args, result = (obj.get(k) for k in ("seq", "tool", "args", "result"))
        if isinstance(seq, bool) or not isinstance(seq, int):
            raise InvalidRequest(f"{where}.seq must be an integer")
        if not isinstance(tool, str):
            raise InvalidRequest(f"{where}.tool must be a string")
        if not isinstance(args, dict) or not isinstance(result, dict):
            raise InvalidRequest(f"{where}.args and {where}.result must be objects")
        return cls(seq=seq, tool=tool, args=args, result=result)


@dataclass(frozen=True, kw_only=True)
class ToolCall:
    """One tool call the model answers: a tool name and its arguments."""

    name: str
    args: dict[str, Any]


@dataclass(frozen=True, kw_only=True)
class Turn:
    """One whole answer: tool calls, or (when there are none) a final text."""

    calls: tuple[ToolCall, ...] = ()
    text: str | None = None


@dataclass(frozen=True, kw_only=True)
class Move:
    """The plan's next answer, already validated; `render(n)` names it after call `n`."""

    tools: tuple[str, ...]  # the tools it calls, in order; () is a final answer
    render: Callable[[int], Turn]


@dataclass(frozen=True, kw_only=True)
class Context:
    """What a plan reads: the run's confirmed steps and what the user said."""

    history: Sequence[Step]
    failed: Sequence[Step] = ()  # calls whose result reported an "error"
    user_texts: Sequence[str] = ()
    parallel: bool = False  # several independent tool calls may share one answer


@dataclass(frozen=True, kw_only=True)
class Plan:
    """A fixed plan, selected by model name."""

    model: str
    summary: str
    tools: Mapping[str, tuple[str, ...]]  # every tool it calls -> the arguments it sends
    next: Callable[[Context], Move]
    spoil: Callable[[ToolCall, int], ToolCall]  # the invalid_args fault; int alternates
    parallel: bool = False


def _first(history: Sequence[Step], tool: str) -> Step | None:
    return next((step for step in history if step.tool == tool), None)


def _reference(step: Step, field: str) -> str:
    value = step.result.get(field)
    if not isinstance(value, str) or not value:
        raise InvalidRequest(f"the {step.tool} step (seq {step.seq}) has no result {field!r}")
    return value


def _final(text: Callable[[int], str]) -> Move:
    return Move(tools=(), render=lambda n: Turn(text=text(n)))


def _calls(tools: Sequence[str], args: Callable[[str, int], dict[str, Any]]) -> Move:
    names = tuple(tools)
    return Move(
        tools=names,
        render=lambda n: Turn(calls=tuple(ToolCall(name=t, args=args(t, n)) for t in names)),
    )


# -- provisioning: a server, a database on it, a DNS record pointing at it -------------------

SERVER, DATABASE, DNS = "create_server", "create_database", "create_dns_record"
_PROVISION_ARGS: Final = {
    SERVER: ("name", "size", "region"),
    DATABASE: ("name", "engine", "server_id"),
    DNS: ("name", "type", "value"),
}
_BAD_ENUM: Final = {SERVER: ("size", "gigantic"), DATABASE: ("engine", "oracle")}


def _provision_args(tool: str, refs: Mapping[str, str], n: int) -> dict[str, Any]:
    if tool == SERVER:
        return {"name": f"srv-{n}", "size": "small", "region": "local-1"}
    if tool == DATABASE:
        return {"name": f"db-{n}", "engine": "postgres", "server_id": refs["server_id"]}
    return {"name": f"app-{n}.example.test", "type": "A", "value": refs["value"]}


def _provisioned(history: Sequence[Step], n: int) -> str:
    parts = []
    for tool, label in ((SERVER, "server"), (DATABASE, "database"), (DNS, "DNS record")):
        step = _first(history, tool)
        if step is not None:
            parts.append(f"{label} {step.args.get('name', '?')} ({step.result.get('id', '?')})")
    return f"All done (call #{n}): {', '.join(parts)}."


def _provision(context: Context) -> Move:
    history = context.history
    server = _first(history, SERVER)
    if server is None:
        return _calls([SERVER], lambda tool, n: _provision_args(tool, {}, n))
    wanted = [tool for tool in (DATABASE, DNS) if _first(history, tool) is None]
    if not wanted:
        return _final(lambda n: _provisioned(history, n))
    if not context.parallel:
        wanted = wanted[:1]
    refs: dict[str, str] = {}
    if DATABASE in wanted:
        refs["server_id"] = _reference(server, "id")
    if DNS in wanted:
        refs["value"] = _reference(server, "ip")
    return _calls(wanted, lambda tool, n: _provision_args(tool, refs, n))


def spoil_provisioning(call: ToolCall, served: int) -> ToolCall:
    """Arguments the cloud refuses: alternately an impossible value and no `name`."""
    args = dict(call.args)
    if served % 2 == 0:
        field, bad = _BAD_ENUM.get(call.name, ("type", "MX"))
        args[field] = bad
    else:
        args.pop("name", None)
    return ToolCall(name=call.name, args=args)


# -- support: look an order up, file a ticket about it, email the customer -------------------

LOOKUP, TICKET, EMAIL = "lookup_order", "file_ticket", "send_email"
_SUPPORT_ARGS: Final = {
    LOOKUP: ("order_id",),
    TICKET: ("order_id", "summary"),
    EMAIL: ("to", "subject", "body"),
}
ORDER_ID: Final = re.compile(r"\b[A-Z]-\d{4}\b")
SUMMARY_CHARS = 120  # a ticket summary quotes at most this much of the user's message


def _order_named(texts: Sequence[str]) -> tuple[str, str] | None:
    """(order id, the message naming it) from the first user message that names one."""
    for text in texts:
        found = ORDER_ID.search(text)
        if found is not None:
            return found.group(), " ".join(text.split())[:SUMMARY_CHARS]
    return None


def _support(context: Context) -> Move:
    history = context.history
    named = _order_named(context.user_texts)
    if named is None:
        return _final(lambda n: f"Which order is this about? Please name it, e.g. A-1001 (#{n}).")
    order_id, said = named
    lookup = _first(history, LOOKUP)
    ticket = _first(history, TICKET)

    def about(tool: str, n: int) -> dict[str, Any]:
        if tool == LOOKUP:
            return {"order_id": order_id}
        return {"order_id": order_id, "summary": f"{said} (#{n})"}

    if lookup is None:
        if any(step.result.get("error") == "unknown_order" for step in context.failed):
            return _final(lambda n: f"I could not find order {order_id} (#{n}).")
        # the ticket needs only the order's id: a parallel answer files it with the lookup
        return _calls([LOOKUP, TICKET] if context.parallel and ticket is None else [LOOKUP], about)
    email = _reference(lookup, "email")
    customer = lookup.result.get("customer") or "there"
    if ticket is None:
        return _calls([TICKET], about)
    ticket_id = _reference(ticket, "id")
    if _first(history, EMAIL) is None:
        body = (
            f"Hello {customer},\n\nwe are sorry about order {order_id}. Ticket {ticket_id} "
            "is open and we will get back to you shortly.\n"
        )
        subject = f"Ticket {ticket_id}: your order {order_id}"
        return _calls(
            [EMAIL],
            lambda tool, n: {"to": email, "subject": f"{subject} (#{n})", "body": body},
        )
    return _final(
        lambda n: f"Filed ticket {ticket_id} for order {order_id} and emailed {email} (#{n})."
    )


def spoil_support(call: ToolCall, served: int) -> ToolCall:
    """Arguments against the schema: alternately a number for the first string, or it missing."""
    args = dict(call.args)
    first = next(iter(_SUPPORT_ARGS.get(call.name, ())), None)
    if first is not None and served % 2 == 0:
        args[first] = 12345
    elif first is not None:
        args.pop(first, None)
    return ToolCall(name=call.name, args=args)


PROVISIONER: Final = Plan(
    model="mock-provisioner",
    summary="a server, a database on it, a DNS record for it; one tool call per answer",
    tools=_PROVISION_ARGS,
    next=_provision,
    spoil=spoil_provisioning,
)
PLANS: Final[Mapping[str, Plan]] = {
    plan.model: plan
    for plan in (
        PROVISIONER,
        Plan(
            model="mock-provisioner-parallel",
            summary="the provisioning plan; the database and DNS record in one answer",
            tools=_PROVISION_ARGS,
            next=_provision,
            spoil=spoil_provisioning,
            parallel=True,
        ),
        Plan(
            model="mock-support",
            summary="look an order up, file a ticket about it, email the customer",
            tools=_SUPPORT_ARGS,
            next=_support,
            spoil=spoil_support,
        ),
        Plan(
            model="mock-support-parallel",
            summary="the support plan; the lookup and the ticket in the first answer",
            tools=_SUPPORT_ARGS,
            next=_support,
            spoil=spoil_support,
            parallel=True,
        ),
    )
}
