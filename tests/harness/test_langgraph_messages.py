"""A LangGraph message graph under conform: a chat model, a ToolNode and a side-effecting tool.

Messages carry random ids, so the raw checkpointer state of two crash-free runs differs;
``GraphSubject.state()`` drops them, and ``state=`` normalises whatever else varies.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from crashresume import Context, conform, current_context

from .subjects import at

pytest.importorskip("langgraph.prebuilt", reason="the LangGraph adapter needs the langgraph extra")
pytest.importorskip("langgraph.checkpoint.sqlite", reason="needs langgraph-checkpoint-sqlite")

from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import BaseTool, tool
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition

from crashresume.adapters.langgraph import (
    GraphSubject,
    checkpointer_state,
    node_effect,
    without_message_ids,
)

MODES = ["inprocess", "process"]


class ChargingModel(BaseChatModel):
    """A fake chat model: asks for ``charge(order)``, then answers with the tool's result."""

    @property
    def _llm_type(self) -> str:
        return "charging-fake"

    def _generate(
        self,
        messages: Sequence[BaseMessage],
        stop: Any = None,
        run_manager: Any = None,
        **kwargs: Any,
    ) -> ChatResult:
        last = messages[-1]
        if isinstance(last, ToolMessage):
            answer = AIMessage(content=f"done: {last.content}")
        else:
            order = str(last.content)
            call = {"name": "charge", "args": {"order": order}, "id": f"call-{order}"}
            answer = AIMessage(content="", tool_calls=[call])
        return ChatResult(generations=[ChatGeneration(message=answer)])


@tool
def charge(order: str) -> str:
    """Charge an order (keyed by thread, step and node)."""
    return str(node_effect("charge", order, perform=lambda: f"charged {order}"))


@tool("charge")
def charge_without_key(order: str) -> str:
    """Charge an order with no idempotency key."""
    ctx = current_context()
    assert ctx is not None
    return str(ctx.effect("charge", order, perform=lambda: f"charged {order}"))


class Chat(MessagesState):
    session: str  # a random id of the user's own: only the state= hook makes it comparable


def agent(state: Chat) -> dict[str, Any]:
    return {"messages": [ChargingModel().invoke(state["messages"])]}


def initial(order: str) -> dict[str, Any]:
    return {"messages": [HumanMessage(order)], "session": str(uuid.uuid4())}


def chat_graph(charging: BaseTool) -> StateGraph[Chat]:
    graph = StateGraph(Chat)
    graph.add_node("agent", agent)
    graph.add_node("tools", ToolNode([charging]))
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", tools_condition)
    graph.add_edge("tools", "agent")
    return graph


def without_session(values: dict[str, Any]) -> dict[str, Any]:
    return {name: value for name, value in values.items() if name != "session"}


class RawState(GraphSubject):
    """The adapter as it was: the checkpointer's channel values as they are."""

    def state(self) -> dict[str, Any]:
        return checkpointer_state(self.graph.checkpointer, prefix=self.prefix)


def factory(
    folder: Path,
    charging: BaseTool = charge,
    subject: type[GraphSubject] = GraphSubject,
    state: Callable[[dict[str, Any]], Any] | None = without_session,
) -> Any:
    @contextlib.contextmanager
    def make_agent(ctx: Context) -> Iterator[GraphSubject]:
        with SqliteSaver.from_conn_string(str(folder / f"{ctx.run_id}.sqlite")) as saver:
            graph = chat_graph(charging).compile(checkpointer=saver)
            yield subject(ctx, graph, initial=initial, state=state, invoke={"durability": "sync"})

    return make_agent


def test_the_raw_state_of_a_message_graph_is_a_nondeterministic_baseline(tmp_path: Path) -> None:
    report = conform(factory(tmp_path, subject=RawState), inputs=["o-1"])

    assert at(report.findings) == {("run", "nondeterministic_baseline")}
    assert report.scenarios == []  # and no crash scenario ran


@pytest.mark.parametrize("mode", MODES)
def test_a_message_graph_with_a_keyed_tool_passes_every_crash(mode: str, tmp_path: Path) -> None:
    report = conform(factory(tmp_path), inputs=["o-1", "o-2"], mode=mode, crashes=2)

    assert report.passed, str(report)
    assert report.baseline_effects == 2
    assert "run-1-then-1" in report.scenarios


@pytest.mark.parametrize("mode", MODES)
def test_a_tool_without_a_key_is_a_duplicate_effect_and_nothing_else(
    mode: str, tmp_path: Path
) -> None:
    report = conform(factory(tmp_path, charge_without_key), inputs=["o-1"], mode=mode)

    # Dying after the charge, before LangGraph checkpointed the tools node: it runs again.
    assert at(report.findings) == {("run-1", "duplicate_effect")}


def test_without_the_state_hook_a_random_field_of_ones_own_is_nondeterministic(
    tmp_path: Path,
) -> None:
    report = conform(factory(tmp_path, state=None), inputs=["o-1"])

    assert at(report.findings) == {("run", "nondeterministic_baseline")}
    assert "session" in report.findings[0].message


def test_without_message_ids_drops_every_message_id_and_keeps_the_rest() -> None:
    message = AIMessage(content="hi", id="random-1")
    value = {"messages": [HumanMessage("o-1", id="random-2"), message], "n": (1, message)}

    cleaned = without_message_ids(value)

    assert cleaned == {
        "messages": [HumanMessage("o-1"), AIMessage(content="hi")],
        "n": (1, AIMessage(content="hi")),
    }
    assert message.id == "random-1"  # the checkpoint's own messages are left alone
