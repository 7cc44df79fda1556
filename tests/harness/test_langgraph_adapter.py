"""crashresume.adapters.langgraph on real LangGraph, with SQLite and in-memory checkpointers."""

from __future__ import annotations

import contextlib
import operator
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest

from crashresume import Context, UsageError, conform, current_context

from .subjects import at, expect

pytest.importorskip("langgraph", reason="the LangGraph adapter needs the langgraph extra")
pytest.importorskip("langgraph.checkpoint.sqlite", reason="needs langgraph-checkpoint-sqlite")

from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, StateGraph

from crashresume.adapters.langgraph import (
    GraphSubject,
    checkpointer_state,
    node_effect,
)

MODES = ["inprocess", "process"]


class Order(TypedDict):
    order: str
    receipts: Annotated[list[str], operator.add]


def charge(state: Order) -> dict[str, Any]:
    order = state["order"]
    return {"receipts": [node_effect("charge", order, perform=lambda: f"charged {order}")]}


def ship(state: Order) -> dict[str, Any]:
    order = state["order"]
    return {"receipts": [node_effect("ship", order, perform=lambda: f"shipped {order}")]}


def charge_without_key(state: Order) -> dict[str, Any]:
    ctx = current_context()
    assert ctx is not None
    order = state["order"]
    return {"receipts": [ctx.effect("charge", order, perform=lambda: f"charged {order}")]}


def builder(first: Any = charge) -> StateGraph[Order]:
    graph = StateGraph(Order)
    graph.add_node("charge", first)
    graph.add_node("ship", ship)
    graph.add_edge(START, "charge")
    graph.add_edge("charge", "ship")
    graph.add_edge("ship", END)
    return graph


def initial(order: str) -> Order:
    return {"order": order, "receipts": []}


def sqlite_factory(
    folder: Path,
    first: Any = charge,
    subject: type[GraphSubject] = GraphSubject,
    **options: Any,
) -> Any:
    @contextlib.contextmanager
    def make_agent(ctx: Context) -> Iterator[GraphSubject]:
        with SqliteSaver.from_conn_string(str(folder / f"{ctx.run_id}.sqlite")) as saver:
            graph = builder(first).compile(checkpointer=saver)
            yield subject(ctx, graph, initial=initial, **options)

    return make_agent


@pytest.mark.parametrize("mode", MODES)
def test_a_graph_of_keyed_nodes_on_sqlite_passes_with_a_crash_in_the_resume_too(
    mode: str, tmp_path: Path
) -> None:
    report = conform(sqlite_factory(tmp_path), inputs=["o-1", "o-2"], mode=mode, crashes=2)

    assert report.passed, str(report)
    assert report.baseline_effects == 4
    assert "run-2-then-1" in report.scenarios


@pytest.mark.parametrize("mode", MODES)
def test_a_node_without_a_key_is_a_duplicate_effect_and_nothing_else(
    mode: str, tmp_path: Path
) -> None:
    make_agent = sqlite_factory(tmp_path, charge_without_key, invoke={"durability": "sync"})
    report = conform(make_agent, inputs=["o-1"], mode=mode)

    # Dying after the charge, before LangGraph checkpointed the node: it runs again. (With
    # the default durability="async" a killed process may also lose the checkpoint after
    # the charge, so that dying around the ship charges again too; "sync" pins it down.)
    assert at(report.findings) == {("run-1", "duplicate_effect")}


def test_an_in_memory_checkpointer_is_state_lost_once_the_process_really_dies() -> None:
    savers: dict[str, InMemorySaver] = {}

    def make_agent(ctx: Context) -> GraphSubject:
        saver = savers.setdefault(ctx.run_id, InMemorySaver())
        return GraphSubject(ctx, builder().compile(checkpointer=saver), initial=initial)

    assert conform(make_agent, inputs=["o-1", "o-2"]).passed  # in-process the memory survives
    savers.clear()
    report = conform(make_agent, inputs=["o-1", "o-2"], mode="process")

    assert {kind for _, kind in at(report.findings)} == {"state_lost"}
    # Lost once o-1 had finished (calls 1 and 2 are o-1's, 3 and 4 o-2's).
    assert at(report.findings) == expect(
        "state_lost", {"run-before-3", "run-3", "run-before-4", "run-4"}
    )


class EmailsAfter(GraphSubject):
    """Bug: the e-mail goes out after the graph finished, only if it had not finished before."""

    def step(self, item: Any) -> Any:
        before = self.graph.get_state(self.config(item))
        finished = (
            not (before.next or before.tasks) and (before.metadata or {}).get("step", -1) >= 0
        )
        result = super().step(item)
        if not finished:
            self.ctx.effect("email", item)
        return result


def test_an_effect_after_the_last_checkpoint_is_effect_lost(tmp_path: Path) -> None:
    report = conform(
        sqlite_factory(tmp_path, subject=EmailsAfter, invoke={"durability": "sync"}),
        inputs=["o-1"],
        mode="process",
    )

    assert at(report.findings) == {("run-before-3", "effect_lost")}
    assert report.findings[0].message == "email('o-1') never happened, once in the baseline"


def test_the_effect_key_is_thread_step_node_and_name(tmp_path: Path) -> None:
    attempts: dict[str, int] = {}

    def counting(state: Order) -> dict[str, Any]:
        ctx = current_context()
        assert ctx is not None
        attempts[ctx.run_id] = attempts.get(ctx.run_id, 0) + 1
        node_effect("charge", {"order": state["order"], "attempt": attempts[ctx.run_id]})
        return {"receipts": ["charged"]}

    report = conform(sqlite_factory(tmp_path, counting), inputs=["o-1"], only="run-1")

    assert at(report.findings) == {("run-1", "key_conflict")}
    assert report.findings[0].message.startswith(
        "key 'o-1:1:charge:charge' was first sent with charge({'attempt': 1, 'order': 'o-1'})"
    )


def test_checkpointer_state_reads_every_thread_of_any_checkpointer(tmp_path: Path) -> None:
    with SqliteSaver.from_conn_string(str(tmp_path / "s.sqlite")) as sqlite:
        for saver in (InMemorySaver(), sqlite):
            graph = builder().compile(checkpointer=saver)
            for thread in ("a/1", "a/2", "b/1"):
                graph.invoke(initial(thread), {"configurable": {"thread_id": thread}})

            state = checkpointer_state(saver, prefix="a/")

            assert state == {
                "1": {"order": "a/1", "receipts": ["charged a/1", "shipped a/1"]},
                "2": {"order": "a/2", "receipts": ["charged a/2", "shipped a/2"]},
            }


def test_a_graph_without_a_checkpointer_is_a_usage_error() -> None:
    def make_agent(ctx: Context) -> GraphSubject:
        return GraphSubject(ctx, builder().compile(), initial=initial)

    with pytest.raises(UsageError, match="needs a graph compiled with a checkpointer"):
        conform(make_agent, inputs=["o-1"])
