"""A support agent: it looks the order up, files a ticket, and emails the customer."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import httpx

from agent_runtime import Agent, Call, Result, Tool, Wiring, tool, url_from_env

DESK_URL = "http://127.0.0.1:8003"  # the mock desk's default address (SUPPORT_URL)


class DeskBusy(Exception):
    """A 5xx: the desk may have acted or not, so the call is retried by its contract."""


def answer(response: httpx.Response) -> Any:
    if response.is_server_error:
        raise DeskBusy(f"HTTP {response.status_code}: {response.text[:200]}")
    return response.raise_for_status().json()  # another refusal fails the call for good


def make_tools(wiring: Wiring, desk_url: str) -> list[Tool]:
    desk = httpx.Client(
        base_url=desk_url,
        timeout=wiring.settings.tool_timeout,
        transport=wiring.transports.get("support"),  # tests serve the desk in-process
    )
    wiring.closing(desk.close)
    retry_on = (httpx.TransportError, DeskBusy)

    @tool(effect="read", retry_on=retry_on)  # no side effect: a restart calls it again
    def lookup_order(call: Call, order_id: str) -> Any:
        """Look an order up: its customer, their email, its status and items."""
        found = desk.get(f"/v1/orders/{quote(order_id, safe='')}")
        return found.json() if found.status_code == 404 else answer(found)  # unknown_order

    @tool(effect="keyed", retry_on=retry_on)  # the desk honours the Idempotency-Key
    def file_ticket(call: Call, order_id: str, summary: str) -> Result:
        """File a support ticket about an order."""
        sent = {"order_id": order_id, "summary": summary}
        ticket = answer(desk.post("/v1/tickets", json=sent, headers=call.headers()))
        return Result(ticket, status=ticket["status"])  # created, or already_done

    # Sending twice delivers twice: check first. The check waits until no earlier send can
    # still land: the desk promises to act on a send within TOOL_TIMEOUT + IN_FLIGHT_MARGIN
    # seconds of receiving it, or never (`in_flight=` declares another bound).
    @tool(effect="checked", retry_on=retry_on)
    def send_email(call: Call, to: str, subject: str, body: str) -> Any:
        """Email a customer."""
        mail = {"message_id": call.key, "to": to, "subject": subject, "body": body}
        return answer(desk.post("/v1/messages", json=mail))

    @send_email.check
    def delivered(call: Call, to: str, subject: str, body: str) -> Any:
        found = answer(desk.get(f"/v1/messages/{quote(call.key, safe='')}"))
        return found["first"] if found["delivered"] else None  # None: never sent

    return [lookup_order, file_ticket, send_email]


def support_agent(desk_url: str) -> Agent:
    return Agent(
        name="support",
        instructions="You help customers with their orders. Look the order up, file a ticket, "
        "email the customer its id, then say what you did.",
        tools=lambda wiring: make_tools(wiring, desk_url),
        model="mock-support",  # MODEL_NAME overrides it
    )


def __getattr__(name: str) -> Agent:
    """``agent``: what ``python -m agent_runtime run --agent examples.support:agent`` runs,
    at ``SUPPORT_URL``. Made on first use, so ``python -m examples.support`` (which starts
    its own desk) does not read SUPPORT_URL; a bad one stops the agent's process at start,
    exit 2, in one line naming it (:func:`agent_runtime.url_from_env`)."""
    if name != "agent":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    made = support_agent(url_from_env("SUPPORT_URL", DESK_URL))
    globals()["agent"] = made
    return made
