"""The seed's agent, written with the public API like any other: it provisions a server,
a database on it and a DNS record pointing at it, in the mock cloud.

Its three tools are ``keyed``: each call goes to the cloud with the idempotency key
``<run>:<seq>`` and the worker's fencing generation, and a re-send of a stranded intent is
answered ``already_done`` with the first result. The cloud client retries a 5xx or a
timeout itself (under the same key), so a tool never has to: ``retry_on`` is empty, and what
the client gives up on (``RemoteUnavailable``) stops the run resumably.

The model speaks the seed's own protocol (``POST /v1/decide``) unless ``MODEL_PROTOCOL=chat``
(the mock model serves the same plan on Chat Completions as ``mock-provisioner``).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import StringConstraints

from agent_runtime.backoff import uniform
from agent_runtime.clients import CloudClient
from agent_runtime.tools.agent import Agent, Wiring
from agent_runtime.tools.tooldef import Call, Result, Tool, tool

MAX_TEXT = 200  # characters in one argument
Text = Annotated[str, StringConstraints(min_length=1, max_length=MAX_TEXT)]

INSTRUCTIONS = (
    "You provision infrastructure: a server, then a PostgreSQL database on it, then a DNS "
    "A record pointing at the server's address. Call one tool at a time; when all three "
    "exist, answer with a short summary."
)


def make_tools(wiring: Wiring, *, client: type[CloudClient] = CloudClient) -> list[Tool]:
    """The three cloud tools over one client made from ``wiring`` (its ``CLOUD_URL``,
    timeout, retries and, in tests, the cloud's in-process transport)."""
    settings = wiring.settings
    cloud = client(
        settings.cloud_url,
        timeout=settings.tool_timeout,
        retries=settings.tool_retries,
        backoff=settings.retry_backoff,
        transport=wiring.transports.get("cloud"),
        **({"sleep": wiring.sleep} if wiring.sleep is not None else {}),
        rand=wiring.rand or uniform,
    )
    wiring.closing(cloud.close)

    def send(path: str, call: Call, args: dict[str, Any]) -> Result:
        answer = cloud.call(path, args, key=call.key, generation=call.generation)
        return Result(answer.result, status=answer.remote_status)

    @tool(effect="keyed", retry_on=())
    def create_server(
        call: Call, name: Text, size: Literal["small", "medium", "large"], region: Text
    ) -> Result:
        """Create a server; its result carries the server's id and ip."""
        return send("/v1/servers", call, {"name": name, "size": size, "region": region})

    @tool(effect="keyed", retry_on=())
    def create_database(
        call: Call, name: Text, engine: Literal["postgres", "mysql"], server_id: Text
    ) -> Result:
        """Create a database on a server (server_id: the server's id)."""
        return send("/v1/databases", call, {"name": name, "engine": engine, "server_id": server_id})

    @tool(effect="keyed", retry_on=())
    def create_dns_record(
        call: Call, name: Text, type: Literal["A", "CNAME"], value: Text
    ) -> Result:
        """Create a DNS record (an A record's value: the server's ip)."""
        return send("/v1/dns_records", call, {"name": name, "type": type, "value": value})

    return [create_server, create_database, create_dns_record]


agent = Agent(
    name="provisioning",
    instructions=INSTRUCTIONS,
    input="Provision a small server in local-1, a postgres database on it, and an A record.",
    tools=make_tools,
    model="mock-provisioner",
    protocol="decide",
)
