"""Errors the mock remotes answer with, one class per HTTP refusal.

The tree::

    MockError                    root; carries the HTTP status and the "error" code
    ├── MissingIdempotencyKey    400 missing_idempotency_key
    ├── InvalidFencingGeneration 400 invalid_fencing_generation
    ├── InvalidArgs              422 invalid_args (cloud tool arguments)
    ├── InvalidRequest           422 invalid_request (a body the mock cannot read)
    ├── StaleGeneration          409 stale_generation (fenced out, nothing happened)
    ├── KeyConflict              409 key_conflict (key reused with other arguments)
    ├── InjectedFailure          500 injected_failure (fail_before knob, nothing happened)
    ├── NotFound                 404 not_found (no such route)
    │   ├── UnknownKey           404 unknown_key (the cloud never acted on this key)
    │   └── UnknownOrder         404 unknown_order (not in the support desk's catalogue)
    └── ChatError                a Chat Completions refusal, in the OpenAI error shape
        ├── ChatInvalidRequest   400 invalid_request_error (a request the model cannot answer)
        └── ChatModelNotFound    404 model_not_found (no plan by that model name)

`ChatError`s answer `{"error": {"message", "type", "param", "code"}}`, the shape
OpenAI's API and its clients use; every other refusal answers
`{"error": code, "detail": ..., **extra}`.

They are raised by the cores and turned into a JSON answer at one boundary
(`mock_remotes._wire.Router.dispatch`), so the FastAPI apps and the in-process
transports answer with the same bytes.
"""

from __future__ import annotations

from typing import ClassVar

__all__ = [
    "ChatError",
    "ChatInvalidRequest",
    "ChatModelNotFound",
    "InjectedFailure",
    "InvalidArgs",
    "InvalidFencingGeneration",
    "InvalidRequest",
    "KeyConflict",
    "MissingIdempotencyKey",
    "MockError",
    "NotFound",
    "StaleGeneration",
    "UnknownKey",
    "UnknownOrder",
]


class MockError(Exception):
    """A request the mock refuses; `status` and `code` become the HTTP answer."""

    status: ClassVar[int] = 500
    code: ClassVar[str] = "mock_error"

    def __init__(self, detail: str, *, extra: dict[str, object] | None = None) -> None:
        super().__init__(detail)
        self.detail = detail
        self.extra: dict[str, object] = dict(extra or {})

    def to_json(self) -> dict[str, object]:
        """The answer body: `{"error": code, "detail": ..., **extra}`."""
        return {"error": self.code, "detail": self.detail, **self.extra}


class MissingIdempotencyKey(MockError):
    status = 400
    code = "missing_idempotency_key"


class InvalidFencingGeneration(MockError):
    status = 400
    code = "invalid_fencing_generation"


class InvalidArgs(MockError):
    status = 422
    code = "invalid_args"


class InvalidRequest(MockError):
    status = 422
    code = "invalid_request"


class StaleGeneration(MockError):
    status = 409
    code = "stale_generation"


class KeyConflict(MockError):
    status = 409
    code = "key_conflict"


class InjectedFailure(MockError):
    status = 500
    code = "injected_failure"


class Forgotten(MockError):
    """A request that was still waiting out its latency when the remote was reset: it never
    acts (the state it was sent into is gone, and so is its sender)."""

    status = 503
    code = "reset_while_in_flight"


class NotFound(MockError):
    status = 404
    code = "not_found"


class UnknownKey(NotFound):
    code = "unknown_key"


class UnknownOrder(NotFound):
    code = "unknown_order"


class ChatError(MockError):
    """A `POST /v1/chat/completions` refusal, answered in the OpenAI error shape.

    `param` names the offending request field (`"messages[2].content"`), `reason`
    is the machine-readable `code` of the OpenAI shape (`"tool_not_offered"`).
    """

    status = 400
    code = "invalid_request_error"  # the OpenAI error "type"

    def __init__(self, detail: str, *, param: str | None = None, reason: str | None = None) -> None:
        super().__init__(detail)
        self.param = param
        self.reason = reason

    def to_json(self) -> dict[str, object]:
        """`{"error": {"message", "type", "param", "code"}}`."""
        error = {"message": self.detail, "type": self.code, "param": self.param}
        return {"error": {**error, "code": self.reason}}


class ChatInvalidRequest(ChatError):
    status = 400


class ChatModelNotFound(ChatError):
    status = 404
