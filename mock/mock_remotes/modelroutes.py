"""The mock model's HTTP contract, as one route table over a `Model`.

POST /v1/decide            {"run_id", "history"} -> {"tool", "args"}
GET  /v1/calls             {"total", "by_run"}
GET  /v1/calls/{run_id}    {"run_id", "calls"}
GET  /admin/faults    POST /admin/faults    POST /admin/reset
GET  /healthz
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from mock_remotes._wire import Call, Reply, Router
from mock_remotes.errors import InvalidRequest
from mock_remotes.modelcore import Model, RawAnswer, parse_request

__all__ = ["model_router"]


def _body(call: Call) -> object:
    try:
        return call.json()
    except ValueError as exc:
        raise InvalidRequest(f"body is not JSON: {exc}") from exc


def model_router(model: Model) -> Router:
    """The route table serving `model`; used by the FastAPI app and the transport."""
    router = Router()

    @router.route("POST", "/v1/decide")
    def decide(call: Call, params: Mapping[str, str]) -> Reply:
        """The next tool call for a run, given its confirmed steps."""
        run_id, history = parse_request(_body(call))
        answer = model.decide(run_id, history, wait=call.wait)
        if isinstance(answer, RawAnswer):
            return Reply(status=200, content=answer.text.encode())
        return Reply.of(200, answer)

    @router.route("GET", "/v1/calls")
    def calls(call: Call, params: Mapping[str, str]) -> Reply:
        """Decide requests counted, in total and per run."""
        return Reply.of(200, model.call_counts())

    @router.route("GET", "/v1/calls/{run_id:path}")
    def run_calls(call: Call, params: Mapping[str, str]) -> Reply:
        """Decide requests counted for one run (0 if unknown)."""
        run_id = params["run_id"]
        return Reply.of(200, {"run_id": run_id, "calls": model.calls(run_id)})

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
        """Forget every call count and fault."""
        model.reset()
        return Reply.of(200, {"reset": True})

    @router.route("GET", "/healthz")
    def healthz(call: Call, params: Mapping[str, str]) -> Reply:
        """Liveness."""
        return Reply.of(200, {"ok": True, "service": "mock-model"})

    return router
