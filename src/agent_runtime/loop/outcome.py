"""What driving a run comes to when it finishes: its :class:`Outcome`, the final answer's
text, the outcome of a run that was already done, and the one refusal of a worker asked to
start a run without knowing which of its agents is meant.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from agent_runtime.errors import AgentRuntimeError
from agent_runtime.store.journal import Journal
from agent_runtime.store.records import Decision, History

log = logging.getLogger("agent_runtime.loop.worker")  # the worker's own lines


@dataclass(frozen=True, kw_only=True)
class Outcome:
    """A run driven to done: how many calls were confirmed and answers journaled, and its
    final answer's text."""

    run_id: str
    status: str  # 'done' here; failures raise
    steps: int  # confirmed tool calls
    llm_calls: int  # journaled model answers
    output: str | None = None  # the final answer's text (None: the model gave none)


def already_done(journal: Journal, run_id: str) -> Outcome:
    """The outcome of a run found done: nothing is driven, the journal says it all."""
    history = journal.history(run_id)
    run = journal.require_run(run_id)
    steps = sum(1 for c in history.calls.values() if c.confirmed)
    log.info("already-done run=%s steps=%d llm_calls=%d", run_id, steps, run.llm_calls)
    return Outcome(
        run_id=run_id, status="done", steps=steps, llm_calls=run.llm_calls, output=run.output
    )


class UnknownAgentChoice(AgentRuntimeError):
    """A new run without an agent on a worker of several: which one is meant?"""

    def __init__(self, names: list[str]) -> None:
        super().__init__(
            f"this worker has several agents ({', '.join(names)}); name the new run's agent"
        )


def output_of(history: History, decision: Decision) -> str | None:
    """The final answer's text: the content of the assistant message that made it."""
    answer = history.answers.get(decision.llm_call)
    content = answer.message.get("content") if answer is not None else None
    return content if isinstance(content, str) else None
