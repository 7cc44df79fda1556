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

A deployment may switch a run's protocol between two of its workers (``configure
model_protocol``): a question may then come in any protocol one of the run's workers was
started with, and a Chat Completions question carries the run's answers of the seed's
``decide`` protocol as the runtime remakes them (:func:`remakes`, from the journal: an
answer kept as the seed's protocol gave it, a tool and its arguments). Each Chat
Completions question is also one a real server accepts: every role known, and each tool
message answering a call of the assistant message before it, once (a remade answer that
lost its ``tool_calls`` passed the whole suite: 2026-12-06, no run ever switched).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Mapping, Sequence
from typing import Any, Final

import httpx

from agent_runtime.tools.agent import Agent

from .remotes import InProcessRemotes, Remotes
from .violations import Violation

KEPT: Final = ("role", "content", "tool_calls")  # what the runtime keeps of an answer
ROLES: Final = frozenset({"system", "user", "assistant", "tool"})
DONE: Final = "done"  # a final answer's tool: it calls nothing


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


def remakes(unanswered: Sequence[Mapping[str, Any]]) -> dict[str, list[Any]]:
    """Each run's answers the journal keeps without an assistant message (the decisions of
    ``remade_decisions``, in run and step order), as the assistant message a Chat
    Completions question carries for each: its calls, each with the model's id or
    ``call_<seq>`` and its arguments (compared as JSON values), a final answer none."""
    grouped: dict[tuple[str, int], list[Mapping[str, Any]]] = {}
    for row in unanswered:
        grouped.setdefault((row["run_id"], row["llm_call"]), []).append(row)
    found: dict[str, list[Any]] = {}
    for (run, _), rows in grouped.items():
        calls = [
            {
                "id": row["call_id"] or f"call_{row['seq']}",
                "type": "function",
                "function": {"name": row["tool"], "arguments": row["args"]},
            }
            for row in rows
            if row["tool"] != DONE
        ]
        message = {"role": "assistant", "content": None, **({"tool_calls": calls} if calls else {})}
        found.setdefault(run, []).append(message)
    return found


def _as_values(message: Any) -> Any:
    """``message`` with each call's arguments read as JSON (a text that is not stays)."""
    if not isinstance(message, dict) or not isinstance(message.get("tool_calls"), list):
        return message
    calls = []
    for call in message["tool_calls"]:
        function = call.get("function") if isinstance(call, dict) else None
        text = function.get("arguments") if isinstance(function, dict) else None
        if isinstance(function, dict) and isinstance(text, str):
            with contextlib.suppress(ValueError):  # not JSON: compared as the text it is
                call = {**call, "function": {**function, "arguments": json.loads(text)}}
        calls.append(call)
    return {**message, "tool_calls": calls}


def unanswerable(messages: list[Any]) -> str | None:
    """Why a Chat Completions server would refuse ``messages``, or None: a role it does
    not know, or a tool message that answers no call of the assistant message before it
    (or one it already answered)."""
    calls: set[Any] = set()
    for i, m in enumerate(messages):
        role = m.get("role") if isinstance(m, dict) else None
        if role not in ROLES:
            return f"message {i} has the role {role!r}"
        if role == "tool":
            if m.get("tool_call_id") not in calls:
                return f"message {i} answers {m.get('tool_call_id')!r}, no call open before it"
            calls.discard(m.get("tool_call_id"))
        elif role == "assistant":
            made = m.get("tool_calls") if isinstance(m.get("tool_calls"), list) else []
            calls = {c.get("id") for c in made if isinstance(c, dict)}
        else:
            calls = set()
    return None


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
    questions: list[dict[str, Any]],
    kinds: Mapping[str, str],
    agents: Mapping[str, Agent],
    spoken: Mapping[str, set[str | None]] | None = None,
    remade: Mapping[str, list[Any]] | None = None,
) -> list[Violation]:
    """**asked**: each question of a run of ``kinds`` is its own (see the module's doc).
    ``spoken``: the protocols each run's workers were started with (None: the agent's own,
    the default); ``remade``: each run's answers as :func:`remakes` makes them."""
    found: list[Violation] = []
    answers = answered(questions)
    for n, question in enumerate(questions):
        run, body = question["run_id"], question["body"]
        kind = kinds.get(run)
        if kind is None:
            continue  # not a run of this schedule's
        agent = agents[kind]
        protocols = {p or agent.protocol for p in (spoken or {}).get(run, {None})}
        if question["protocol"] not in protocols:
            found.append(
                Violation(
                    "asked",
                    run,
                    None,
                    f"question {n} came in the {question['protocol']!r} protocol; the agent "
                    f"{agent.name} speaks {agent.protocol!r}"
                    + (
                        f" (configured: {sorted(protocols)})"
                        if protocols != {agent.protocol}
                        else ""
                    ),
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
        elif (problem := unanswerable(messages)) is not None:
            text = f"question {n} is one no Chat Completions server answers: {problem}"
            found.append(Violation("asked", run, None, text))
        else:
            given = answers.get(run, [])
            kept = [_as_values(m) for m in (remade or {}).get(run, [])]
            made = [
                m
                for m in messages
                if isinstance(m, dict)
                and m.get("role") == "assistant"
                and _kept(m) not in given
                and _as_values(_kept(m)) not in kept
            ]
            if made:
                text = (
                    f"question {n} carries {made[0]!r:.300}, no answer the model gave (nor "
                    "the remake of an answer the journal keeps without its message)"
                )
                found.append(Violation("asked", run, None, text))
    return found
