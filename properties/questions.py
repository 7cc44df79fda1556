"""What the runtime asked the model, and the check that it asked the run's own question.

The mock model keeps every question it answered as it came (``Model.questions``,
``GET /v1/questions``). **asked** (teardown): every Chat Completions question of a run
opens with its agent's instructions (the system message, when the agent has any) and the
run's input (the first user message), exactly; every question of either protocol names
the run it is asked for and carries a list of steps or messages. Without it a runtime that
dropped the instructions or the input from every request passed the whole suite: the mock
answers from the history alone (ARCHITECTURE.md, mutation gap class 18).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import httpx

from agent_runtime.tools.agent import Agent

from .remotes import InProcessRemotes, Remotes
from .violations import Violation


def asked(remotes: Remotes) -> list[dict[str, Any]]:
    """Every question the mock model answered since its last reset, oldest first."""
    if isinstance(remotes, InProcessRemotes):
        return remotes.model.questions()
    response = httpx.get(f"{remotes.model_url}/v1/questions", timeout=10.0)
    found: list[dict[str, Any]] = response.raise_for_status().json()["questions"]
    return found


def opening(agent: Agent) -> list[dict[str, Any]]:
    """The messages every Chat Completions question of ``agent``'s runs starts with (a run
    started without an input of its own: the suite's never have one)."""
    system = [{"role": "system", "content": agent.instructions}] if agent.instructions else []
    return [*system, {"role": "user", "content": agent.input or ""}]


def asked_truly(
    questions: list[dict[str, Any]], kinds: Mapping[str, str], agents: Mapping[str, Agent]
) -> list[Violation]:
    """**asked**: each question of a run of ``kinds`` is its own (see the module's doc)."""
    found: list[Violation] = []
    for n, question in enumerate(questions):
        run, body = question["run_id"], question["body"]
        kind = kinds.get(run)
        if kind is None:
            continue  # not a run of this schedule's
        agent = agents[kind]
        if question["protocol"] == "decide":
            if body.get("run_id") != run or not isinstance(body.get("history"), list):
                found.append(Violation("asked", run, None, f"question {n} is {body!r:.200}"))
            continue
        messages = body.get("messages")
        want = opening(agent)
        if body.get("user") != run or not isinstance(messages, list):
            found.append(Violation("asked", run, None, f"question {n} is {body!r:.200}"))
        elif messages[: len(want)] != want:
            found.append(
                Violation(
                    "asked",
                    run,
                    None,
                    f"question {n} opens with {messages[: len(want)]!r:.300}, not the agent "
                    f"{agent.name}'s instructions and the run's input {want!r:.300}",
                )
            )
    return found
