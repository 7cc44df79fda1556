"""An agent: a model, the tools it may call, and what it is for.

::

    from agent_runtime import Agent, Worker

    support = Agent(
        name="support",
        instructions="You answer customers about their orders.",
        tools=[lookup_order, file_ticket, send_email],
        model="gpt-4o-mini",
    )
    worker.run("ticket-42", agent=support, input="Order A-1001 arrived broken")

``tools`` is a list of :class:`~agent_runtime.tools.tooldef.Tool`, or a function that makes
them from a :class:`Wiring` (the settings, and the in-process transports of tests), for
tools that need a client configured by the worker. ``protocol`` is the model's wire format:
``chat`` (Chat Completions, the default) or ``decide`` (the seed's mock protocol). Every
run records its agent's ``name``; a worker refuses a run of an agent it does not have.

On the command line an agent is addressed as ``package.module:attribute``
(:func:`load_agent`); the default is the seed's provisioning agent,
``agent_runtime.tools.provisioning:agent``.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final, Literal

import httpx

from agent_runtime.config import Settings
from agent_runtime.errors import ConfigError, UnknownAgent
from agent_runtime.tools.tooldef import Tool

Protocol = Literal["chat", "decide"]
DEFAULT_AGENT: Final = "agent_runtime.tools.provisioning:agent"
_NAME: Final = re.compile(r"[A-Za-z0-9_.-]{1,64}")  # matched whole (fullmatch)
_ADDRESS: Final = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_]\w*")


@dataclass(frozen=True, kw_only=True)
class Wiring:
    """What a worker gives an agent's tool factory."""

    settings: Settings
    transports: Mapping[str, httpx.BaseTransport] = field(default_factory=dict)  # by remote
    sleep: Callable[[float], None] | None = None  # how a client waits between attempts
    rand: Callable[[], float] | None = None  # the jitter of those waits
    closers: list[Callable[[], None]] = field(default_factory=list)  # run by Worker.close

    def closing(self, close: Callable[[], None]) -> None:
        """Have the worker call ``close`` when it closes (a client a tool factory made)."""
        self.closers.append(close)


ToolFactory = Callable[[Wiring], Sequence[Tool]]


@dataclass(frozen=True, kw_only=True)
class Agent:
    name: str
    tools: Sequence[Tool] | ToolFactory
    instructions: str = ""  # the system message
    input: str | None = None  # the task of a run started without one
    model: str | None = None  # the model's name (MODEL_NAME overrides it)
    protocol: Protocol = "chat"

    def __post_init__(self) -> None:
        if not _NAME.fullmatch(self.name):
            raise ConfigError(
                f"an agent's name is 1-64 letters, digits, '.', '_' or '-', got {self.name!r}"
            )
        if self.protocol not in ("chat", "decide"):
            raise ConfigError(f"protocol must be 'chat' or 'decide', got {self.protocol!r}")
        if not callable(self.tools):
            _check_tools(self.name, self.tools)

    def make_tools(self, wiring: Wiring) -> dict[str, Tool]:
        """The agent's tools by name, made for one worker."""
        tools = self.tools(wiring) if callable(self.tools) else self.tools
        _check_tools(self.name, tools)
        return {t.name: t for t in tools}


def _check_tools(agent: str, tools: Sequence[Tool]) -> None:
    wrong = [t for t in tools if not isinstance(t, Tool)]
    if wrong:
        raise ConfigError(f"agent {agent!r}: {wrong[0]!r} is not a Tool; decorate it with @tool")
    names = [t.name for t in tools]
    if len(set(names)) != len(names):
        raise ConfigError(f"agent {agent!r} has two tools of one name: {sorted(names)}")
    unchecked = [t.name for t in tools if t.effect == "checked" and t.checker is None]
    if unchecked:
        raise ConfigError(
            f"agent {agent!r}: tool {unchecked[0]!r} is 'checked' but has no check, which a "
            f"restart needs; decorate one with @{unchecked[0]}.check"
        )


def load_agent(address: str) -> Agent:
    """The :class:`Agent` at ``package.module:attribute``, or a ConfigError saying why not."""
    if not _ADDRESS.fullmatch(address):
        raise ConfigError(f"an agent is named as package.module:attribute, got {address!r}")
    module_name, _, attribute = address.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ConfigError:  # the module refused its own settings (url_from_env): as it said
        raise
    except ImportError as exc:
        raise ConfigError(f"cannot import {module_name!r} for agent {address!r}: {exc}") from exc
    except Exception as exc:  # the module's own code failed: say how, without a traceback
        raise ConfigError(
            f"importing {module_name!r} for agent {address!r} failed: {type(exc).__name__}: {exc}"
        ) from exc
    if not hasattr(module, attribute):
        there = sorted(name for name, value in vars(module).items() if isinstance(value, Agent))
        raise ConfigError(
            f"module {module_name!r} has no {attribute!r} for agent {address!r} "
            f"({'its agents: ' + ', '.join(there) if there else 'it defines no Agent'})"
        )
    agent = getattr(module, attribute)
    if not isinstance(agent, Agent):
        raise ConfigError(
            f"{address!r} is not an agent_runtime.Agent (found {type(agent).__name__})"
        )
    return agent


def by_name(agents: Sequence[Agent]) -> dict[str, Agent]:
    """Agents keyed by name; two agents of one name are refused."""
    found: dict[str, Agent] = {}
    for agent in agents:
        if agent.name in found and found[agent.name] is not agent:
            raise ConfigError(f"two different agents are both called {agent.name!r}")
        found[agent.name] = agent
    return found


def agent_of(agents: Mapping[str, Agent], name: str, run_id: str) -> Agent:
    """The agent a run belongs to, or :class:`UnknownAgent` naming what this worker has."""
    try:
        return agents[name]
    except KeyError:
        raise UnknownAgent(
            f"run {run_id} belongs to agent {name!r}, which this worker does not have "
            f"(it has: {', '.join(sorted(agents)) or 'none'}); start one with --agent"
        ) from None


def agents_of(addresses: Sequence[str] | None) -> list[Agent]:
    """The agents ``--agent`` names (default: the seed's provisioning agent)."""
    agents = []
    for address in addresses or [DEFAULT_AGENT]:
        try:
            agents.append(load_agent(address))
        except ConfigError as exc:
            raise ConfigError(f"--agent {address!r}: {exc}") from exc
    return agents
