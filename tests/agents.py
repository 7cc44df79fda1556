"""Agents for the tests, written with the public API like a user's own, importable as
``tests.agents:<name>`` by ``python -m agent_runtime run --agent ...`` and the supervisor.

Each is a support agent on the mock support desk (``mock_remotes.Support``), driven by the
mock model's ``mock-support`` plan (look the order up, file a ticket, email the customer):

=========================  ==========================================================
``support``                ``lookup_order`` read, ``file_ticket`` keyed,
                           ``send_email`` checked (the mailbox's GET is the check)
``support_once``           the same, but ``send_email`` is ``once`` (no check)
``support_blind``          broken on purpose: ``send_email`` is checked, but its check
                           always says "not there", so a restart sends again
=========================  ==========================================================

Where the desk is: the worker's in-process transport named ``support`` when it has one
(tests in one process, ``agent_runtime.conformance``); otherwise ``$SUPPORT_URL``. This
module is the edge of these agents, read in the worker process when the tools are made;
nothing in the library reads it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any, Final
from urllib.parse import quote

import httpx

from agent_runtime.errors import ConfigError
from agent_runtime.tools import provisioning
from agent_runtime.tools.agent import Agent, Wiring
from agent_runtime.tools.tooldef import Call, Result, Tool, tool

SUPPORT_URL: Final = "SUPPORT_URL"  # where the support desk listens, for the CLI
INSTRUCTIONS: Final = (
    "You answer customers about their orders: look the order up, file a ticket about it, "
    "then email the customer; end with a one-line summary."
)
TASK: Final = "Order A-1001 arrived broken: the mug is cracked."


def desk_client(wiring: Wiring) -> httpx.Client:
    """A client of the support desk: in-process when the worker has its transport."""
    transport = wiring.transports.get("support")
    if transport is not None:
        base = "http://support"
    else:
        base = os.environ.get(SUPPORT_URL, "")
        if not base:
            raise ConfigError(
                f"{SUPPORT_URL} must name the support desk, e.g. http://127.0.0.1:8003"
            )
    client = httpx.Client(base_url=base, transport=transport, timeout=wiring.settings.tool_timeout)
    wiring.closing(client.close)
    return client


def _answer(response: httpx.Response) -> Any:
    response.raise_for_status()
    return response.json()


def support_tools(
    wiring: Wiring, *, email: str = "checked", blind_check: bool = False
) -> Sequence[Tool]:
    desk = desk_client(wiring)

    @tool(effect="read")
    def lookup_order(call: Call, order_id: str) -> Any:
        """Look an order up: its customer, their email, the items."""
        response = desk.get(f"/v1/orders/{quote(order_id, safe='')}")
        if response.status_code == 404:
            return response.json()  # {"error": "unknown_order", ...}: the model hears it
        return _answer(response)

    @tool(effect="keyed")
    def file_ticket(call: Call, order_id: str, summary: str) -> Result:
        """File a support ticket about an order."""
        body = _answer(
            desk.post(
                "/v1/tickets",
                json={"order_id": order_id, "summary": summary},
                headers=call.headers(),
            )
        )
        return Result(body, status=body["status"])

    def send(call: Call, to: str, subject: str, body: str) -> Any:
        message = {"message_id": call.key, "to": to, "subject": subject, "body": body}
        return _answer(desk.post("/v1/messages", json=message))

    send.__doc__ = "Email the customer (one delivery per send)."
    send.__name__ = "send_email"
    send_email = tool(send, effect="checked" if email == "checked" else "once")

    if email == "checked":

        @send_email.check
        def delivered(call: Call, to: str, subject: str, body: str) -> Any:
            if blind_check:
                return None  # the bug on purpose: "not there", whatever the mailbox says
            answer = _answer(desk.get(f"/v1/messages/{quote(call.key, safe='')}"))
            return answer["first"] if answer["delivered"] else None

    return [lookup_order, file_ticket, send_email]


def _agent(name: str, tools: Callable[[Wiring], Sequence[Tool]]) -> Agent:
    return Agent(
        name=name,
        instructions=INSTRUCTIONS,
        input=TASK,
        tools=tools,
        model="mock-support",
        protocol="chat",
    )


# The seed's provisioning tools on the mock model's parallel plan: the database and the DNS
# record come in one answer (two tool calls) once the server exists.
provisioning_parallel = Agent(
    name="provisioning-parallel",
    instructions=provisioning.INSTRUCTIONS,
    input="Provision a small server in local-1, a postgres database on it, and an A record.",
    tools=provisioning.make_tools,
    model="mock-provisioner-parallel",
    protocol="chat",
)

support = _agent("support", support_tools)
support_once = _agent("support-once", lambda w: support_tools(w, email="once"))
support_blind = _agent("support-blind", lambda w: support_tools(w, blind_check=True))
