"""Agents: what makes one valid, how one is addressed, and what a worker gives its tools."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import httpx
import pytest

from agent_runtime import Agent, Call, ConfigError, Journal, Settings, Tool, UnknownAgent, Wiring
from agent_runtime import tool as make_tool
from agent_runtime.loop.outcome import UnknownAgentChoice
from agent_runtime.loop.worker import Worker
from agent_runtime.store.db import Connection, connect
from agent_runtime.tools.agent import DEFAULT_AGENT, agent_of, by_name, load_agent
from agent_runtime.tools.provisioning import agent as provisioning


@make_tool(effect="read")
def lookup(call: Call, order_id: str) -> dict[str, str]:
    """Look an order up."""
    return {"id": order_id}


@make_tool(effect="keyed")
def file_ticket(call: Call, summary: str) -> dict[str, str]:
    """File a ticket."""
    return {"id": f"T-{call.seq}"}


support = Agent(name="support", tools=[lookup, file_ticket], model="mock-support")
NOT_AN_AGENT = {"name": "support"}
NOTHING = None  # an attribute that is there, and is not an agent


@pytest.mark.parametrize("name", ["a", "support-2", "team.support_v1", "x" * 64])
def test_a_name_of_letters_digits_dots_dashes_and_underscores_is_an_agent_name(name: str) -> None:
    assert Agent(name=name, tools=[]).name == name


@pytest.mark.parametrize("name", ["", "x" * 65, "two words", "a/b", "a:b", "rün", "a\n"])
def test_any_other_name_is_refused_saying_what_a_name_may_hold(name: str) -> None:
    with pytest.raises(ConfigError, match="an agent's name is 1-64 letters, digits"):
        Agent(name=name, tools=[])


def test_an_unknown_protocol_is_refused_naming_the_two() -> None:
    with pytest.raises(ConfigError, match="protocol must be 'chat' or 'decide', got 'grpc'"):
        Agent(name="a", tools=[], protocol="grpc")  # type: ignore[arg-type]


def test_two_tools_of_one_name_are_refused() -> None:
    again = make_tool(lambda call: {}, effect="read", name="lookup")

    with pytest.raises(ConfigError, match=r"agent 'a' has two tools of one name: \['lookup', 'l"):
        Agent(name="a", tools=[lookup, again])


def test_a_function_that_is_not_a_tool_is_refused_saying_to_decorate_it() -> None:
    def plain(call: Call) -> None:
        return None

    with pytest.raises(ConfigError, match=r"agent 'a': <function .*plain.*> is not a Tool; deco"):
        Agent(name="a", tools=[lookup, plain])  # type: ignore[list-item]


def test_a_checked_tool_without_its_check_is_refused_when_the_agent_is_made() -> None:
    @make_tool(effect="checked")
    def send(call: Call, to: str) -> None:
        return None

    with pytest.raises(ConfigError, match=r"'send' is 'checked' but has no check.*@send\.check"):
        Agent(name="a", tools=[send])

    send.check(lambda call, to: None)
    assert Agent(name="a", tools=[send]).make_tools(Wiring(settings=Settings())) == {"send": send}


def test_a_factorys_tools_are_checked_when_a_worker_makes_them() -> None:
    agent = Agent(name="a", tools=lambda wiring: [lookup, lookup])  # made later: not checked yet

    with pytest.raises(ConfigError, match="agent 'a' has two tools of one name"):
        agent.make_tools(Wiring(settings=Settings()))


# -- addresses ------------------------------------------------------------------------------


def test_the_default_address_is_the_seeds_provisioning_agent() -> None:
    assert DEFAULT_AGENT == "agent_runtime.tools.provisioning:agent"
    assert load_agent(DEFAULT_AGENT) is provisioning
    assert load_agent("tests.test_agents:support") is support


@pytest.mark.parametrize(
    "address",
    [
        "tests.test_agents",
        "tests.test_agents:",
        ":support",
        "tests/test_agents.py:support",
        "tests.test_agents:support.name",
        "tests.test_agents:support:x",
        " tests.test_agents:support",
        "1tests:support",
    ],
)
def test_an_address_of_the_wrong_shape_is_refused_showing_the_right_one(address: str) -> None:
    with pytest.raises(ConfigError, match=r"an agent is named as package\.module:attribute, got"):
        load_agent(address)


def test_a_module_that_does_not_import_is_refused_with_the_import_error() -> None:
    with pytest.raises(
        ConfigError,
        match=r"cannot import 'tests\.no_such_module' for agent 'tests\.no_such_module:agent'",
    ):
        load_agent("tests.no_such_module:agent")


def test_a_module_whose_own_import_fails_is_refused_naming_what_it_lacks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "needs_more.py").write_text("import no_such_dependency_h10\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))

    with pytest.raises(ConfigError, match=r"cannot import 'needs_more'.*no_such_dependency_h10"):
        load_agent("needs_more:agent")


def test_a_missing_attribute_is_refused_naming_the_agents_the_module_has() -> None:
    with pytest.raises(ConfigError) as refused:
        load_agent("tests.test_agents:suport")
    assert str(refused.value) == (
        "module 'tests.test_agents' has no 'suport' for agent 'tests.test_agents:suport' "
        "(its agents: provisioning, support)"  # what it defines and what it imports
    )


def test_a_module_whose_code_fails_at_import_is_refused_saying_how(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "broken_at_import.py").write_text("1 / 0\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))

    with pytest.raises(ConfigError) as refused:
        load_agent("broken_at_import:agent")
    assert str(refused.value) == (
        "importing 'broken_at_import' for agent 'broken_at_import:agent' failed: "
        "ZeroDivisionError: division by zero"
    )


@pytest.mark.parametrize(
    ("address", "found"),
    [
        ("tests.test_agents:NOT_AN_AGENT", "dict"),
        ("tests.test_agents:lookup", "Tool"),
        ("tests.test_agents:NOTHING", "NoneType"),
    ],
)
def test_an_attribute_that_is_not_an_agent_is_refused_saying_what_it_is(
    address: str, found: str
) -> None:
    with pytest.raises(ConfigError) as refused:
        load_agent(address)
    assert str(refused.value) == f"'{address}' is not an agent_runtime.Agent (found {found})"


# -- a worker's agents ------------------------------------------------------------------------


def test_agents_by_name_take_one_agent_twice_but_not_two_of_one_name() -> None:
    assert by_name([support, provisioning, support]) == {
        "support": support,
        "provisioning": provisioning,
    }
    other = Agent(name="support", tools=[lookup])

    with pytest.raises(ConfigError, match="two different agents are both called 'support'"):
        by_name([support, other])


def test_a_run_of_an_agent_the_worker_lacks_is_refused_naming_the_ones_it_has() -> None:
    agents = by_name([support, provisioning])

    assert agent_of(agents, "support", "r-1") is support
    with pytest.raises(UnknownAgent) as refused:
        agent_of(agents, "billing", "r-1")
    assert str(refused.value) == (
        "run r-1 belongs to agent 'billing', which this worker does not have "
        "(it has: provisioning, support); start one with --agent"
    )
    with pytest.raises(UnknownAgent, match=r"\(it has: none\)"):
        agent_of({}, "billing", "r-1")


class Client:
    """What a tool factory opens with the worker's settings and transports."""

    def __init__(self, base_url: str, transport: httpx.BaseTransport | None) -> None:
        self.base_url = base_url
        self.transport = transport
        self.closed = 0

    def close(self) -> None:
        self.closed += 1


def test_a_tool_factory_gets_the_workers_wiring_once_and_its_clients_close_with_the_worker(
    database_url: str,
) -> None:
    made: list[tuple[Wiring, Client]] = []

    def tools(wiring: Wiring) -> Sequence[Tool]:
        client = Client(wiring.settings.cloud_url, wiring.transports.get("desk"))
        wiring.closing(client.close)
        made.append((wiring, client))
        return [lookup]

    agent = Agent(name="factory", tools=tools)
    desk = httpx.MockTransport(lambda request: httpx.Response(204))
    settings = Settings(cloud_url="http://desk.test")
    sleeps: list[float] = []
    worker = Worker(
        Journal(connect(database_url)),
        settings,
        agents=agent,
        transports={"desk": desk},
        sleep=sleeps.append,
    )

    assert worker.tools_for(agent) == {"lookup": lookup}
    assert worker.tools_for(agent) == {"lookup": lookup}
    ((wiring, client),) = made  # made once per worker
    assert wiring.settings is settings and client.base_url == "http://desk.test"
    assert client.transport is desk and wiring.sleep is not None
    wiring.sleep(0.5)
    assert sleeps == [0.5]
    assert client.closed == 0

    worker.close()

    assert client.closed == 1
    assert worker.journal.conn.closed


def test_a_worker_that_closed_its_clients_makes_the_tools_again_when_it_goes_on(
    database_url: str,
) -> None:
    clients: list[Client] = []

    def tools(wiring: Wiring) -> Sequence[Tool]:
        clients.append(Client("", None))
        wiring.closing(clients[-1].close)
        return [lookup]

    agent = Agent(name="factory", tools=tools)
    worker = Worker(Journal(connect(database_url)), Settings(), agents=agent)
    try:
        worker.tools_for(agent)
        worker.close_clients()
        worker.tools_for(agent)
    finally:
        worker.close()

    assert [c.closed for c in clients] == [1, 1]


def test_a_worker_of_several_agents_asks_which_one_a_new_run_is_for(conn: Connection) -> None:
    worker = Worker(Journal(conn), Settings(), agents=[support, provisioning])
    try:
        with pytest.raises(UnknownAgentChoice, match=r"agents \(provisioning, support\); name"):
            worker.run("which-one")
        assert worker.journal.get_run("which-one") is None
    finally:
        worker.close_clients()
