"""LangGraph under ``conform``: node effects keyed by thread, step and node; checkpointer state.

    from crashresume.adapters.langgraph import GraphSubject, node_effect

    def charge(state):                         # a node
        receipt = node_effect("charge", state["order"], perform=lambda: pay(state["order"]))
        return {"receipts": [receipt]}

    @contextlib.contextmanager
    def make_agent(ctx):                       # one SQLite checkpointer per scenario
        with SqliteSaver.from_conn_string(str(tmp_path / f"{ctx.run_id}.sqlite")) as saver:
            yield GraphSubject(ctx, builder.compile(checkpointer=saver))

    report = conform(make_agent, inputs=["o-1", "o-2"], mode="process")

The key of a node's effect is ``<thread id>:<step>:<node>:<name>`` (a subgraph's node adds
its parents' checkpoint namespaces): a node LangGraph runs again after a restart, because
its superstep had not been checkpointed, sends it again under the same key, and the harness
answers like an idempotent remote. Two effects of the same name in one node need ``key=``.

``GraphSubject`` runs one thread per input (thread id ``str(input)``): a thread that did not
finish resumes from its last checkpoint, a finished one is left alone, a new one is invoked
with ``initial(input)``. ``state()`` reads the last checkpoint of every thread from the
graph's checkpointer (``checkpointer_state`` works with any ``BaseCheckpointSaver``).

Messages carry a random ``id`` (``add_messages`` gives one to every message without), so
two crash-free runs of a message graph never agree: ``state()`` drops the ids of every
LangChain message in the channel values (``without_message_ids``), and ``state=`` takes a
function of one thread's channel values for the rest (a timestamp, a run id of your own):

    GraphSubject(ctx, graph, state=lambda values: {"messages": values["messages"]})

LangGraph is imported only when one of these is used: ``pip install 'crashresume[langgraph]'``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from crashresume._context import Context, current_context
from crashresume._errors import UsageError


def _config() -> dict[str, Any]:
    try:
        from langgraph.config import get_config
    except ImportError as exc:
        raise UsageError(
            "crashresume.adapters.langgraph needs LangGraph: pip install 'crashresume[langgraph]'"
        ) from exc
    try:
        config: dict[str, Any] = dict(get_config())
    except RuntimeError as exc:
        raise UsageError(
            "node_effect() runs inside a LangGraph node (it reads the node's config)"
        ) from exc
    return config


def node_key(name: str) -> str:
    """``<thread id>:<step>:<node>:<name>`` of the node running now."""
    config = _config()
    thread = config.get("configurable", {}).get("thread_id")
    metadata = config.get("metadata", {})
    if thread is None:
        raise UsageError(
            "node_effect() needs a thread id: compile the graph with a checkpointer and invoke "
            'it with config={"configurable": {"thread_id": ...}} (GraphSubject does)'
        )
    parents = "|".join(str(metadata.get("langgraph_checkpoint_ns", "")).split("|")[:-1])
    where = f"{metadata.get('langgraph_step')}:{metadata.get('langgraph_node')}"
    return f"{thread}:{parents + ':' if parents else ''}{where}:{name}"


def node_effect(
    name: str, arg: Any, *, perform: Callable[[], Any] | None = None, key: str | None = None
) -> Any:
    """One side effect inside a LangGraph node, keyed by thread, step and node (or ``key``).

    Under ``conform`` it is ``ctx.effect(name, arg, key=node_key(name), perform=perform)``;
    outside it just calls ``perform()`` (and returns None without one).
    """
    ctx = current_context()
    if ctx is None:
        return None if perform is None else perform()
    return ctx.effect(name, arg, node_key(name) if key is None else key, perform=perform)


def checkpointer_state(checkpointer: Any, *, prefix: str = "") -> dict[str, Any]:
    """The channel values of the last checkpoint of every thread whose id starts with
    ``prefix`` (the prefix is cut off the keys). Works with any LangGraph checkpointer."""
    threads: list[str] = []
    for saved in checkpointer.list(None):
        configurable = saved.config.get("configurable", {})
        thread = str(configurable.get("thread_id"))
        if configurable.get("checkpoint_ns") or not thread.startswith(prefix):
            continue  # a subgraph's own checkpoints, or another scenario's threads
        if thread not in threads:
            threads.append(thread)
    state: dict[str, Any] = {}
    for thread in threads:
        latest = checkpointer.get_tuple({"configurable": {"thread_id": thread}})
        if latest is not None:
            state[thread[len(prefix) :]] = dict(latest.checkpoint.get("channel_values", {}))
    return state


def without_message_ids(value: Any) -> Any:
    """``value`` with the ``id`` of every LangChain message in it set to ``None``, looking
    inside dicts, lists and tuples (the rest is returned as it is)."""
    from langchain_core.messages import BaseMessage

    if isinstance(value, BaseMessage):
        return value.model_copy(update={"id": None}) if value.id is not None else value
    if isinstance(value, dict):
        return {key: without_message_ids(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(without_message_ids(item) for item in value)
    return value


class GraphSubject:
    """A conform subject that runs one LangGraph thread per input (see the module docstring).

    ``prefix`` goes in front of every thread id; give ``f"{ctx.run_id}/"`` when scenarios
    share one checkpointer (a PostgreSQL one, say), so that each sees only its own threads.
    ``invoke`` holds keyword arguments for every ``graph.invoke``, e.g.
    ``{"durability": "sync"}`` to checkpoint each superstep before the next one starts.
    ``state`` maps one thread's channel values (message ids already dropped) to what the
    harness compares, e.g. to leave out a field that differs from run to run.
    """

    def __init__(
        self,
        ctx: Context,
        graph: Any,
        *,
        thread_id: Callable[[Any], str] = str,
        initial: Callable[[Any], Any] = lambda item: item,
        prefix: str = "",
        invoke: dict[str, Any] | None = None,
        state: Callable[[dict[str, Any]], Any] | None = None,
    ) -> None:
        self.ctx = ctx
        self.invoke_options = dict(invoke or {})
        self.graph = graph
        self.thread_id = thread_id
        self.initial = initial
        self.prefix = prefix
        self.normalise = state
        if getattr(graph, "checkpointer", None) is None:
            raise UsageError(
                "GraphSubject needs a graph compiled with a checkpointer, e.g. "
                "builder.compile(checkpointer=SqliteSaver(...)): without one nothing survives "
                "a restart"
            )

    def config(self, item: Any) -> dict[str, Any]:
        return {"configurable": {"thread_id": self.prefix + self.thread_id(item)}}

    def step(self, item: Any) -> Any:
        config = self.config(item)
        if self.graph.get_state(config).created_at is None:  # never started
            return self.graph.invoke(self.initial(item), config, **self.invoke_options)
        # Started before: carry on from the last checkpoint and its pending writes (a
        # finished thread just returns its values). The last checkpoint may be an early
        # one: by default (durability="async") LangGraph writes checkpoints in the
        # background, so a killed process may not have written the later ones.
        return self.graph.invoke(None, config, **self.invoke_options)

    def state(self) -> dict[str, Any]:
        threads = checkpointer_state(self.graph.checkpointer, prefix=self.prefix)
        normalise = self.normalise
        return {
            thread: without_message_ids(values)
            if normalise is None
            else normalise(without_message_ids(values))
            for thread, values in threads.items()
        }
