"""The model side: ask a model what to do next, over either of the two wire formats.

=============  ===============================================================================
``ChatModel``  the OpenAI Chat Completions API with tool calling (``POST {base}/chat/
               completions``): what OpenAI, vLLM, Ollama and llama.cpp's server speak. The
               conversation is rebuilt from the journal (:mod:`agent_runtime.llm.conversation`),
               so a resumed run sends the history that actually happened.
``DecideModel``  the seed's own protocol (``POST /v1/decide`` with the confirmed steps),
               which the mock model and the demo speak.
=============  ===============================================================================

Both answer an :class:`Answer`: the message whole (journaled as it came, with the model's
tool call ids and token usage; a call that came without an id of its own gets one, so its
result can name it) and the calls it proposes, in order; an answer without tool
calls is the final one (:data:`DONE`), its text the run's output. Parsing stops at the
shape of the answer; which tool a name means and whether its arguments are valid is the
worker's to check, against the agent's own tools (:mod:`agent_runtime.llm.deciding`). An answer
nested too deep to parse is :class:`~agent_runtime.errors.MalformedAnswer`; arguments that
are not JSON are kept as they came (``Proposed.problem``), to be shown back to the model.

Transient failures (a connect error, a 5xx, a 408 or 429, a timeout) are asked again after
exponential waits with jitter; a 404 or 405 is :class:`~agent_runtime.errors.WrongEndpoint`
(the URL names the wrong service), but a 404 ``model_not_found``, a 401 or a 403 is a
:class:`~agent_runtime.errors.ConfigError` naming ``MODEL_NAME`` or ``MODEL_API_KEY``.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

import httpx

from agent_runtime.clients import TRANSIENT, WRONG_ENDPOINT, HttpClient, error_of
from agent_runtime.config import MODEL_RETRIES
from agent_runtime.errors import ConfigError, MalformedAnswer, ModelError, ModelUnavailable
from agent_runtime.llm.conversation import DONE, Question, Steps, Transcript, encoded, opening
from agent_runtime.tools.tooldef import Tool

log = logging.getLogger(__name__)

AUTH_REFUSED = (401, 403)
_TOO_DEEP = "the model's {what} is nested deeper than a JSON parser goes (see journalable.py)"
JSON_BODY = {"Content-Type": "application/json"}


@dataclass(frozen=True, kw_only=True)
class Proposed:
    """One call a model answer proposes: a tool and its arguments (not yet checked)."""

    tool: str  # a tool's name, or DONE for the final answer
    args: Any  # what the model sent; the worker validates it
    call_id: str | None = None  # the model's id of the call (Chat Completions)
    problem: str | None = None  # why its arguments could not be read (not JSON)


@dataclass(frozen=True, kw_only=True)
class Answer:
    message: dict[str, Any]  # the answer whole, as the journal keeps it
    usage: dict[str, Any] | None
    calls: tuple[Proposed, ...]  # in the model's order; the final answer is one DONE
    text: str | None = None  # the final answer's text: the run's output


class Model(Protocol):
    """What the worker needs of a model client."""

    def ask(self, question: Question) -> Answer: ...

    def close(self) -> None: ...


class _ModelClient(HttpClient):
    default_retries: ClassVar[int] = MODEL_RETRIES
    path: ClassVar[str]

    def _post(
        self, run_id: str, body: Mapping[str, Any] | bytes, headers: Mapping[str, str]
    ) -> Any:
        """POST ``body`` (JSON, or already encoded); the answer's JSON, after retrying what
        is transient."""
        if isinstance(body, bytes):
            return self._send(run_id, {"content": body}, {**headers, **JSON_BODY})
        return self._send(run_id, {"json": body}, headers)

    def _send(self, run_id: str, body: dict[str, Any], headers: Mapping[str, str]) -> Any:
        problem = ""
        for attempt in range(self._retries + 1):
            if attempt:
                log.info("model-retry run=%s attempt=%d after=%r", run_id, attempt + 1, problem)
            self._pause(attempt)
            try:
                response = self._http.post(self.url(self.path), **body, headers=dict(headers))
            except httpx.TimeoutException as exc:
                problem = f"no answer in time: {exc!r}"
                continue
            except httpx.DecodingError as exc:
                raise MalformedAnswer(
                    f"the model's answer cannot be decoded as its Content-Encoding says: {exc}"
                ) from exc
            except httpx.TransportError as exc:
                problem = f"{exc!r}"
                continue
            if response.status_code >= 500 or response.status_code in TRANSIENT:
                error, detail = error_of(response)
                problem = f"HTTP {response.status_code} {error}: {detail}"
                continue
            return self._json(response)
        raise ModelUnavailable(
            f"cannot reach the model at {self._http.base_url} after {self._retries + 1} "
            f"attempt(s) (last: {problem}); the run is resumable"
        )

    def _json(self, response: httpx.Response) -> Any:
        if response.status_code in WRONG_ENDPOINT:
            error, detail = error_of(response)
            if error == "model_not_found":  # the server is right, the model's name is not
                raise ConfigError(
                    f"the model server at {self._http.base_url} has no model named as asked "
                    f"({detail}); check MODEL_NAME (or the agent's model); the run is resumable"
                )
            raise self._wrong_endpoint(response, "MODEL_URL", "the model")
        if response.status_code in AUTH_REFUSED:
            error, detail = error_of(response)
            raise ConfigError(
                f"the model refused the request (HTTP {response.status_code} {error}: "
                f"{detail}); check MODEL_API_KEY"
            )
        if response.status_code != 200:
            error, detail = error_of(response)
            raise ModelError(f"the model answered HTTP {response.status_code} {error}: {detail}")
        try:
            return json.loads(response.content)
        except ValueError as exc:
            raise MalformedAnswer(
                f"the model's answer is not JSON: {response.text[:200]!r}"
            ) from exc
        except RecursionError:
            raise MalformedAnswer(_TOO_DEEP.format(what="answer")) from None


class DecideModel(_ModelClient):
    """The seed's protocol: ``POST /v1/decide`` with the run's confirmed steps, answered
    ``{"tool": name, "args": {...}}`` or ``{"tool": "done"}``.

    ``base_url`` is the server's root; one ending in ``/v1`` (the base URL Chat Completions
    clients want, so that one ``MODEL_URL`` serves a worker whose agents speak both) means
    the same server."""

    path = "/v1/decide"

    def __init__(self, base_url: str, **kw: Any) -> None:
        root = base_url.rstrip("/")
        super().__init__(root.removesuffix("/v1") if root.endswith("/v1") else base_url, **kw)

    def decide(self, run_id: str, history: list[dict[str, Any]]) -> Any:
        """The raw answer to ``history`` (the confirmed steps); :meth:`ask` parses it.

        Asking again costs nothing but a model call: the answer is journaled only once it
        arrives, so a question whose answer was lost is simply asked again.
        """
        return self._post(run_id, {"run_id": run_id, "history": history}, {})

    def ask(self, question: Question) -> Answer:
        """:meth:`decide` with the run's confirmed steps, each encoded once for the run
        (:class:`~agent_runtime.llm.conversation.Steps`)."""
        steps = Steps.of(question.history).json(question.history)
        run = encoded({"run_id": question.run_id})[:-1]
        body = b"".join([run, b',"history":[', steps, b"]}"])
        return parse_decision(self._post(question.run_id, body, {}))


def parse_decision(raw: Any) -> Answer:
    """The seed's protocol's answer as an :class:`Answer`, or :class:`MalformedAnswer`."""
    if not isinstance(raw, dict):
        raise MalformedAnswer(f"the model's answer is not a JSON object: {raw!r:.200}")
    tool = raw.get("tool")
    if not isinstance(tool, str) or not tool:
        raise MalformedAnswer(f"the model's answer has no tool name: {raw!r:.200}")
    return Answer(message=raw, usage=None, calls=(Proposed(tool=tool, args=raw.get("args")),))


class ChatModel(_ModelClient):
    """The Chat Completions API: ``POST {base}/chat/completions`` with the conversation,
    the tools as functions, ``tool_choice: auto``, and the run's id as ``user``."""

    path = "chat/completions"

    def __init__(self, base_url: str, *, model: str, api_key: str | None = None, **kw: Any):
        super().__init__(base_url, **kw)
        self.model = model
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._tools: tuple[tuple[Tool, ...], bytes] = ((), b"")  # the last tools, encoded

    def ask(self, question: Question) -> Answer:
        raw = self._post(question.run_id, self.body(question), self._headers)
        return parse_completion(raw)

    def body(self, question: Question) -> bytes:
        """The request: the messages (the run's :class:`~agent_runtime.llm.conversation.
        Transcript`: only the steps since the last question are encoded), the model, the
        run as ``user``, the tools (encoded once for as long as they stay the same)."""
        history = question.history
        parts = [b'{"messages":[', b",".join(encoded(m) for m in opening(question))]
        answers = Transcript.of(history).json(history)
        if answers:
            parts += [b",", answers]
        parts += [b"],", encoded({"model": self.model, "user": question.run_id})[1:-1]]
        if question.tools:
            parts += [b',"tools":', self._specs(question.tools), b',"tool_choice":"auto"']
        return b"".join([*parts, b"}"])

    def _specs(self, tools: Sequence[Tool]) -> bytes:
        last, data = self._tools
        if len(last) != len(tools) or any(a is not b for a, b in zip(last, tools, strict=False)):
            specs = json.dumps([t.spec() for t in tools], ensure_ascii=False, separators=(",", ":"))
            self._tools = (tuple(tools), data := specs.encode())
        return data


def parse_completion(raw: Any) -> Answer:
    """A Chat Completions response as an :class:`Answer`, or :class:`MalformedAnswer`."""
    try:
        message = raw["choices"][0]["message"]
    except (KeyError, IndexError, TypeError):
        raise MalformedAnswer(
            f"the model's answer has no choices[0].message: {raw!r:.200}"
        ) from None
    if not isinstance(message, dict):
        raise MalformedAnswer(f"the model's message is not an object: {message!r:.200}")
    usage = raw.get("usage") if isinstance(raw.get("usage"), dict) else None
    tool_calls = message.get("tool_calls") or []
    if not isinstance(tool_calls, list):
        raise MalformedAnswer(f"the model's tool_calls is not a list: {tool_calls!r:.200}")
    calls: list[Proposed] = []
    named: list[Any] = []  # the tool calls as kept: each with an id of its own
    for i, call in enumerate(tool_calls):
        function = call.get("function") if isinstance(call, dict) else None
        name = function.get("name") if isinstance(function, dict) else None
        if not isinstance(name, str) or not name:
            raise MalformedAnswer(f"tool call {i} of the model's answer names no function")
        text = function.get("arguments") if isinstance(function, dict) else None
        if text is not None and not isinstance(text, str):
            raise MalformedAnswer(
                f"the arguments of the model's call to {name} must be a JSON text (a string), "
                f"got {type(text).__name__}: {text!r:.200}"
            )
        problem = None
        try:
            args = json.loads(text) if isinstance(text, str) and text.strip() else {}
        except ValueError:  # the call is journaled as it came, and the model told why
            args = None
            problem = f"the arguments of the model's call to {name} are not JSON: {text!r:.200}"
        except RecursionError:
            raise MalformedAnswer(_TOO_DEEP.format(what=f"call to {name}'s arguments")) from None
        call_id = call.get("id")
        if not isinstance(call_id, str) or not call_id or call_id in {c["id"] for c in named}:
            # Some servers give none, or one twice: a result must name its own call, so the
            # kept answer carries the id the conversation answers it with.
            call_id = f"call_{uuid.uuid4().hex[:24]}"
            call = {**call, "id": call_id}
        named.append(call)
        calls.append(Proposed(tool=name, args=args, call_id=call_id, problem=problem))
    kept = {key: message[key] for key in ("role", "content", "tool_calls") if key in message}
    if named:
        kept["tool_calls"] = named
    if calls:
        return Answer(message=kept, usage=usage, calls=tuple(calls))
    content = message.get("content")
    text = content if isinstance(content, str) else ""
    return Answer(message=kept, usage=usage, calls=(Proposed(tool=DONE, args={}),), text=text)
