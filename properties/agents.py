"""The agents the suite's runs belong to: every effect contract, and parallel tool calls.

A ``start`` event names one of :data:`KINDS` (the default is the seed's agent):

==============  =================================  ===========================================
kind            agent (model)                      its tools and their contracts
==============  =================================  ===========================================
provisioning    ``provisioning`` (``/v1/decide``)  server, database, DNS record: ``keyed``
parallel        ``provisioning-parallel``          the same three; the database and the DNS
                (``mock-provisioner-parallel``)    record come in one answer: two calls
support         ``support`` (``mock-support``)     ``lookup_order`` ``read``, ``file_ticket``
                                                   ``keyed``, ``send_email`` ``checked``
once            ``support-once``                   the same, but ``send_email`` is ``once``
                (``mock-support-parallel``)        and returns nothing (a null result), and
                                                   the lookup and the ticket come in the
                                                   first answer: two calls at step 0
==============  =================================  ===========================================

The support tools talk to the mock support desk (``mock_remotes.Support``) through the
agent's own HTTP client: the in-process runner hands them the desk's transport under the
name ``support``; the process runner gives them its uvicorn URL. ``send_email`` sends the
call's idempotency key as the message id, which is what its ``check`` asks the desk about;
the desk itself delivers a message every time it is sent (nothing there stops a second
delivery: only the contract does). Every request carries the worker's fencing generation,
which the desk logs with its answer (it enforces nothing): that is how the suite tells which
worker's request an answer belonged to.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping
from typing import Annotated, Any, Final, Literal, cast
from urllib.parse import quote

import httpx
from pydantic import StringConstraints

from agent_runtime import Agent, Call, Result, Tool, Wiring, tool
from agent_runtime.clients import GENERATION_HEADER
from agent_runtime.tools import provisioning as seed
from agent_runtime.tools.agent import Protocol
from agent_runtime.tools.tooldef import Effect

from . import waits

KINDS: Final = ("provisioning", "parallel", "support", "once")
DEFAULT_KIND: Final = "provisioning"
SUPPORT_INPUT: Final = "Order A-1001 arrived broken: the mug is chipped."
Text = Annotated[str, StringConstraints(min_length=1, max_length=2000)]


class DeskUnavailable(Exception):
    """The desk answered 5xx: the request may have acted or not (retried by contract)."""


def _answer(response: httpx.Response) -> dict[str, Any]:
    """The desk's JSON body; a 5xx is :class:`DeskUnavailable`, a 4xx a plain failure."""
    if response.status_code >= 500:
        raise DeskUnavailable(f"{response.status_code}: {response.text[:200]}")
    response.raise_for_status()  # a refusal: the call failed for certain, the model hears why
    body: dict[str, Any] = response.json()
    return body


def desk_tools(wiring: Wiring, *, url: str, email: Literal["checked", "once"]) -> list[Tool]:
    """The three support tools over one client to the desk at ``url``."""
    settings = wiring.settings
    http = httpx.Client(
        base_url=url,
        timeout=settings.tool_timeout,
        transport=wiring.transports.get("support"),
    )
    wiring.closing(http.close)
    again = (httpx.TransportError, DeskUnavailable)
    retries = settings.tool_retries
    backoff = settings.retry_backoff  # the desk's tools back off as the cloud's client does

    def fence(call: Call) -> dict[str, str]:
        return {GENERATION_HEADER: str(call.generation)}

    @tool(effect=configured("read"), retry_on=again, retries=retries, backoff=backoff)
    def lookup_order(call: Call, order_id: Text) -> Result:
        """Look an order up: its customer, their email, its items."""
        waits.attempted(call, "lookup_order")
        order = _answer(http.get(f"/v1/orders/{quote(order_id, safe='')}", headers=fence(call)))
        return Result(order, status="read")

    @tool(effect=configured("keyed"), retry_on=again, retries=retries, backoff=backoff)
    def file_ticket(call: Call, order_id: Text, summary: Text) -> Result:
        """File a support ticket about an order."""
        waits.attempted(call, "file_ticket")
        body = {"order_id": order_id, "summary": summary}
        ticket = _answer(http.post("/v1/tickets", json=body, headers=call.headers()))
        return Result(ticket, status=str(ticket.get("status", "created")))

    def send(call: Call, to: Text, subject: Text, body: Text) -> Result | None:
        waits.attempted(call, "send_email")
        message = {"message_id": call.key, "to": to, "subject": subject, "body": body}
        delivered = _answer(http.post("/v1/messages", json=message, headers=fence(call)))
        # The `once` email says nothing back once sent, as many real tools do: its call is
        # confirmed with a null result, which a conversation must still answer (`null`).
        return Result(delivered, status="created") if email == "checked" else None

    send_email = tool(
        send,
        effect=configured(email),
        name="send_email",
        description="Email the customer.",
        retry_on=again,
        retries=retries,
        backoff=backoff,
    )
    if email == "checked":

        @send_email.check
        def delivered(call: Call, to: str, subject: str, body: str) -> Result | None:
            waits.attempted(call, "send_email")
            path = f"/v1/messages/{quote(call.key, safe='')}"
            found = _answer(http.get(path, headers=fence(call)))
            return None if not found["delivered"] else Result(found["first"], status="found")

    return [lookup_order, file_ticket, send_email]


def suite_agents(support_url: str) -> Mapping[str, Agent]:
    """The suite's agents by kind, their support tools talking to ``support_url``."""
    return {
        # the seed's agent, its protocol as configuration would give it (``decide``: equal
        # to the runtime's literal, never the same object, as the desk's contracts are)
        "provisioning": dataclasses.replace(
            seed.agent, protocol=cast(Protocol, "".join(list(seed.agent.protocol)))
        ),
        "parallel": Agent(
            name="provisioning-parallel",
            tools=seed.make_tools,
            instructions=seed.INSTRUCTIONS,
            model="mock-provisioner-parallel",
        ),
        "support": _desk_agent("support", support_url, email="checked"),
        "once": _desk_agent(
            "support-once", support_url, email="once", model="mock-support-parallel"
        ),
    }


def configured(effect: Effect) -> Effect:
    """``effect`` as a contract read from configuration would be: equal to the runtime's own
    literal, never the same object (the desk's tools have theirs so; an ``is`` where ``==``
    is meant then shows: ``acting``'s ``is not "read"`` mutant, seed-43 sample)."""
    return cast(Effect, "".join(list(effect)))


def _desk_agent(
    name: str,
    support_url: str,
    *,
    email: Literal["checked", "once"],
    model: str = "mock-support",
) -> Agent:
    """The support agent whose email tool has the contract ``email``, asking ``model``."""
    return Agent(
        name=name,
        tools=functools.partial(desk_tools, url=support_url, email=email),
        instructions="You answer customers about their orders.",
        input=SUPPORT_INPUT,
        model=model,
    )


# What each effectful tool leaves at its remote: the kind of record the suite reads back.
KIND_OF: Final = {
    "create_server": "server",
    "create_database": "database",
    "create_dns_record": "dns_record",
    "file_ticket": "ticket",
    "send_email": "email",
}
