"""What the runtime asked the model, and the check that it asked the run's own question.

The mock model keeps every question it answered as it came (``Model.questions``,
``GET /v1/questions``). **asked** (teardown): every Chat Completions question of a run
opens with its agent's instructions (the system message, when the agent has any) and the
run's input (the first user message), exactly, and each assistant message in it is an
answer the model gave that run, as the runtime keeps one (its role, content and tool
calls with their ids); every question of either protocol names the run it is asked for,
carries a list of steps or messages (a ``decide`` question's steps each once, in step
order: a runtime that kept a step twice passed the suite, 2026-12-06 full run), and
comes in its agent's protocol (a runtime that
asked the seed's ``decide`` agent in Chat Completions passed the whole suite: the mock
answers both alike, 2026-12-06 full run). Without it a runtime that dropped the
instructions or the input from every request, or sent its own remake of an answer, passed
the whole suite: the mock answers from the history alone (ARCHITECTURE.md, mutation gap
class 18).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

import httpx

from agent_runtime.tools.agent import Agent

from .remotes import InProcessRemotes, Remotes
from .violations import Violation

KEPT: Final = ("role", "content", "tool_calls")  # what the runtime keeps of an answer


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


def _kept(message: Any) -> Any:
    if not isinstance(message, dict):
        return message
    return {key: message[key] for key in KEPT if key in message}


def answered(questions: list[dict[str, Any]]) -> dict[str, list[Any]]:
    """Each run's chat answers' messages, as the runtime keeps them."""
    found: dict[str, list[Any]] = {}
    for question in questions:
        answer = question.get("answer")
        if question["protocol"] == "chat" and isinstance(answer, dict):
            for choice in answer.get("choices") or []:
                found.setdefault(question["run_id"], []).append(_kept(choice.get("message")))
    return found


def used_truly(
    questions: list[dict[str, Any]], journaled: Sequence[Mapping[str, Any]]
) -> list[Violation]:
    """**asked**, of the journal: each journaled Chat Completions answer (a row of
    ``model_answers``: run, llm_call, message, usage) carries the token usage of an answer
    the model gave its run with that message (a runtime that journaled no usage, or one
    where the model reported none, passed the suite: 2026-12-06 full run)."""
    given: dict[str, list[tuple[Any, Any]]] = {}
    for question in questions:
        answer = question.get("answer")
        if question["protocol"] == "chat" and isinstance(answer, dict):
            for choice in answer.get("choices") or []:
                kept = _kept(choice.get("message"))
                given.setdefault(question["run_id"], []).append((kept, answer.get("usage")))
    found: list[Violation] = []
    for row in journaled:
        run, message = row["run_id"], _kept(row["message"])
        usages = [usage for kept, usage in given.get(run, []) if kept == message]
        if usages and row["usage"] not in usages:
            text = (
                f"answer {row['llm_call']} is journaled with usage {row['usage']!r:.200}; "
                f"the model reported {usages[0]!r:.200} with it"
            )
            found.append(Violation("asked", run, None, text))
    return found


def asked_truly(
    questions: list[dict[str, Any]], kinds: Mapping[str, str], agents: Mapping[str, Agent]
) -> list[Violation]:
    """**asked**: each question of a run of ``kinds`` is its own (see the module's doc)."""
    found: list[Violation] = []
    answers = answered(questions)
    for n, question in enumerate(questions):
        run, body = question["run_id"], question["body"]
        kind = kinds.get(run)
        if kind is None:
            continue  # not a run of this schedule's
        agent = agents[kind]
        if question["protocol"] != agent.protocol:
            found.append(
                Violation(
                    "asked",
                    run,
                    None,
                    f"question {n} came in the {question['protocol']!r} protocol; the agent "
                    f"{agent.name} speaks {agent.protocol!r}",
                )
            )
            continue
        if question["protocol"] == "decide":
            history = body.get("history")
            if body.get("run_id") != run or not isinstance(history, list):
                found.append(Violation("asked", run, None, f"question {n} is {body!r:.200}"))
                continue
            seqs = [step.get("seq") if isinstance(step, dict) else None for step in history]
            numbered = [seq for seq in seqs if isinstance(seq, int)]
            if len(numbered) != len(seqs) or numbered != sorted(set(numbered)):
                text = f"question {n}'s steps are at {seqs!r:.200}: each once, in step order"
                found.append(Violation("asked", run, None, text))
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
        else:
            given = answers.get(run, [])
            made = [
                m
                for m in messages
                if isinstance(m, dict) and m.get("role") == "assistant" and _kept(m) not in given
            ]
            if made:
                text = f"question {n} carries {made[0]!r:.300}, no answer the model gave"
                found.append(Violation("asked", run, None, text))
    return found
