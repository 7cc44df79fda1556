"""The mock model's HTTP contract, as one route table over a `Model`.

POST /v1/decide            {"run_id", "history"} -> {"tool", "args"}
POST /v1/chat/completions  OpenAI Chat Completions with tool calling (mock_remotes.chat)
GET  /v1/models            the plans, by model name
GET  /v1/calls             {"total", "by_run"}
GET  /v1/calls/{run_id}    {"run_id", "calls"}
GET  /v1/questions         {"questions": [{"run_id", "protocol", "body", "answer"}]}, oldest first
GET  /admin/faults    POST /admin/faults    POST /admin/reset
GET  /healthz
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, cast

from mock_remotes._wire import Call, Reply, Router
from mock_remotes.chat import models
from mock_remotes.chatrequest import RUN_HEADER, parse_chat
from mock_remotes.errors import ChatInvalidRequest, InvalidRequest
from mock_remotes.modelcore import Answer, Model, RawAnswer, parse_request

__all__ = ["model_router"]


def _body(call: Call) -> object:
    try:
        return call.json()
    except ValueError as exc:
        raise InvalidRequest(f"body is not JSON: {exc}") from exc


def _answer(answer: Answer) -> Reply:
    if isinstance(answer, RawAnswer):
        return Reply(status=200, content=answer.text.encode())
    return Reply.of(200, answer)


def model_router(model: Model) -> Router:
    """The route table serving `model`; used by the FastAPI app and the transport."""
    router = Router()

    @router.route("POST", "/v1/decide")
    def decide(call: Call, params: Mapping[str, str]) -> Reply:
        """The next tool call for a run, given its confirmed steps."""
        body = _body(call)
        run_id, history = parse_request(body)
        answer = model.decide(run_id, history, wait=call.wait)
        model.heard(run_id, "decide", cast(dict[str, Any], body), answer)
        return _answer(answer)

    @router.route("POST", "/v1/chat/completions")
    def chat_completions(call: Call, params: Mapping[str, str]) -> Reply:
        """The next assistant message of a conversation (OpenAI Chat Completions)."""
        try:
            body = call.json()
        except ValueError as exc:
            raise ChatInvalidRequest(f"the body is not JSON: {exc}", reason="invalid_json") from exc
        request = parse_chat(body, run_header=call.header(RUN_HEADER))
        answer = model.complete(request, wait=call.wait)
        model.heard(request.run_id, "chat", cast(dict[str, Any], body), answer)
        return _answer(answer)

    @router.route("GET", "/v1/models")
    def list_models(call: Call, params: Mapping[str, str]) -> Reply:
        """The model names the mock answers to, one per plan."""
        return Reply.of(200, models())

    @router.route("GET", "/v1/calls")
    def calls(call: Call, params: Mapping[str, str]) -> Reply:
        """Requests counted (decide and chat completions), in total and per run."""
        return Reply.of(200, model.call_counts())

    @router.route("GET", "/v1/calls/{run_id:path}")
    def run_calls(call: Call, params: Mapping[str, str]) -> Reply:
        """Requests counted for one run, both protocols (0 if unknown)."""
        run_id = params["run_id"]
        return Reply.of(200, {"run_id": run_id, "calls": model.calls(run_id)})

    @router.route("GET", "/v1/questions")
    def questions(call: Call, params: Mapping[str, str]) -> Reply:
        """Every question answered (both protocols) since the last reset, as it came."""
        return Reply.of(200, {"questions": model.questions()})

    @router.route("GET", "/admin/faults")
    def get_faults(call: Call, params: Mapping[str, str]) -> Reply:
        """The current fault and latency knobs."""
        return Reply.of(200, dataclasses.asdict(model.faults))

    @router.route("POST", "/admin/faults")
    def set_faults(call: Call, params: Mapping[str, str]) -> Reply:
        """Replace the given knobs: malformed, unknown_tool, invalid_args, latency."""
        body = _body(call) if call.body.strip() else {}
        if not isinstance(body, dict):
            raise InvalidRequest("faults must be a JSON object")
        return Reply.of(200, dataclasses.asdict(model.set_faults(body)))

    @router.route("POST", "/admin/reset")
    def reset(call: Call, params: Mapping[str, str]) -> Reply:
        """Forget every call count, question and fault."""
        model.reset()
        return Reply.of(200, {"reset": True})

    @router.route("GET", "/healthz")
    def healthz(call: Call, params: Mapping[str, str]) -> Reply:
        """Liveness."""
        return Reply.of(200, {"ok": True, "service": "mock-model"})

    return router
