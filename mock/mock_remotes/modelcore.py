"""The mock model: given a run's history, it names the next tool call.

Two protocols share one model: its own `POST /v1/decide` (`decide`, given the
run's confirmed steps) and the OpenAI Chat Completions wire format (`complete`,
given the conversation; `mock_remotes.chat`). Both follow the plans of
`mock_remotes.plans` and count into the same per-run call count, added to
before anything else, so every name the model picks carries it (`srv-1`,
`db-2`, `app-3.example.test`) and a step decided twice shows up (`srv-2`).
Counts live in memory, or in a small JSON file (`state_path`) when they must
survive a restart of the mock.

Fault knobs make the next answers bad on purpose: `malformed`, `unknown_tool`,
`invalid_args`, consumed one per answer of either protocol. When several are
set, they are served in that order.

Every question the model answers (a request its protocol accepted) is kept as it came,
with its run, its protocol and the answer (`questions`, `GET /v1/questions`; the last
`QUESTIONS_KEPT`), so a test can compare what a runtime asked with what it should have.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from mock_remotes.chat import Fault, RawAnswer, completion
from mock_remotes.chatrequest import ChatRequest
from mock_remotes.errors import InvalidRequest
from mock_remotes.faults import ModelFaults, updated
from mock_remotes.plans import PROVISIONER, Context, Step, ToolCall, spoil_provisioning

__all__ = ["TOOLS", "Answer", "Model", "RawAnswer", "Step", "parse_request"]

logger = logging.getLogger(__name__)

TOOLS: Final = ("create_server", "create_database", "create_dns_record", "done")
UNKNOWN_TOOL: Final = "delete_everything"
_TRUNCATED: Final = '{"tool": "create_server", "args": {"name": "srv-'
FAULTS: Final[tuple[Fault, ...]] = ("malformed", "unknown_tool", "invalid_args")
QUESTIONS_KEPT: Final = 10_000  # the questions kept (a long-lived mock forgets the oldest)


def parse_request(body: object) -> tuple[str, list[Step]]:
    """`(run_id, history)` from a `POST /v1/decide` body, else `InvalidRequest`."""
    if not isinstance(body, dict):
        raise InvalidRequest('body must be {"run_id": str, "history": [...]}')
    run_id, history = body.get("run_id"), body.get("history")
    if not isinstance(run_id, str) or not run_id:
        raise InvalidRequest("run_id must be a non-empty string")
    if not isinstance(history, list):
        raise InvalidRequest("history must be a list of steps")
    return run_id, [Step.from_json(step, i) for i, step in enumerate(history)]


Answer = dict[str, Any] | RawAnswer


@dataclass(frozen=True, kw_only=True)
class _Counted:
    """One counted call: its number, and the fault (if any) it is answered with."""

    n: int
    fault: Fault | None
    served: int  # how many answers this fault spoiled before: alternates its flavours
    latency: float


def _spoiled(decision: dict[str, Any], fault: Fault, served: int) -> Answer:
    """`decision` made bad by `fault`; `served` alternates the two flavours of each."""
    if fault == "unknown_tool":
        return {"tool": UNKNOWN_TOOL, "args": {}}
    if fault == "malformed":
        if served % 2 == 0:
            return RawAnswer(_TRUNCATED)
        return {"args": decision["args"], "thought": "I forgot to name a tool"}
    if decision["tool"] == "done":  # a final answer has no arguments to break (the runtime
        # keeps any it carries): call the plan's first tool with nothing, as chat does
        return {"tool": next(iter(PROVISIONER.tools)), "args": {}}
    spoiled = spoil_provisioning(ToolCall(name=decision["tool"], args=decision["args"]), served)
    return {"tool": spoiled.name, "args": spoiled.args}


class Model:
    """The mock model; safe to share between threads."""

    def __init__(
        self, state_path: str | os.PathLike[str] | None = None, *, latency: float = 0.0
    ) -> None:
        """`state_path`: JSON file keeping the call counts across restarts (None: memory).

        `latency` (seconds) is the baseline of the latency knob, restored by `reset()`.
        """
        self.state_path = None if state_path is None else Path(state_path)
        self._lock = threading.Lock()
        self._baseline = updated(ModelFaults(), {"latency": latency})
        self._faults = self._baseline
        self._served: dict[Fault, int] = {"malformed": 0, "unknown_tool": 0, "invalid_args": 0}
        self._by_run: dict[str, int] = self._load()
        self._questions: deque[dict[str, Any]] = deque(maxlen=QUESTIONS_KEPT)

    # -- deciding --------------------------------------------------------------------

    def decide(
        self,
        run_id: str,
        history: Sequence[Step],
        *,
        wait: Callable[[float], None] = time.sleep,
    ) -> Answer:
        """Count the call, then name the next tool (possibly spoiled by a fault knob).

        A step whose result holds an ``"error"`` (a failed call, or one the runtime refused)
        is not done: the plan asks for it again."""
        done = [step for step in history if "error" not in step.result]
        failed = [step for step in history if "error" in step.result]
        move = PROVISIONER.next(Context(history=done, failed=failed))
        counted = self._count(run_id, wait)
        turn = move.render(counted.n)
        call = turn.calls[0] if turn.calls else ToolCall(name="done", args={})
        decision = {"tool": call.name, "args": call.args}
        if counted.fault is None:
            logger.debug("mock model run=%s call=%d decided %s", run_id, counted.n, decision)
            return decision
        logger.info(
            "mock model run=%s call=%d answers with fault %s", run_id, counted.n, counted.fault
        )
        return _spoiled(decision, counted.fault, counted.served)

    def complete(
        self, request: ChatRequest, *, wait: Callable[[float], None] = time.sleep
    ) -> Answer:
        """Count the call, then answer a Chat Completions request (`mock_remotes.chat`).

        `parse_chat` already refused what the model cannot answer, uncounted.
        """
        counted = self._count(request.run_id, wait)
        if counted.fault is None:
            logger.debug(
                "mock model run=%s call=%d answers %s",
                request.run_id,
                counted.n,
                request.move.tools or "text",
            )
        else:
            logger.info(
                "mock model run=%s call=%d answers with fault %s",
                request.run_id,
                counted.n,
                counted.fault,
            )
        return completion(
            request, counted.n, fault=counted.fault, served=counted.served, created=int(time.time())
        )

    def _count(self, run_id: str, wait: Callable[[float], None]) -> _Counted:
        """Add one to the run's count, take the next fault, then spend the latency."""
        with self._lock:
            n = self._by_run[run_id] = self._by_run.get(run_id, 0) + 1
            self._save()
            fault = self._take_fault()
            served = 0
            if fault is not None:
                served = self._served[fault]
                self._served[fault] = served + 1
            latency = self._faults.latency
        if latency > 0:
            wait(latency)
        return _Counted(n=n, fault=fault, served=served, latency=latency)

    def _take_fault(self) -> Fault | None:
        for fault in FAULTS:
            left: int = getattr(self._faults, fault)
            if left > 0:
                self._faults = updated(self._faults, {fault: left - 1})
                return fault
        return None

    # -- questions -------------------------------------------------------------------------

    def heard(self, run_id: str, protocol: str, body: Mapping[str, Any], answer: Answer) -> None:
        """Keep a question this model answered: its run, its protocol (``decide`` or
        ``chat``), its body as the client sent it, and the answer (a raw one as its text)."""
        said = answer.text if isinstance(answer, RawAnswer) else answer
        entry = {"run_id": run_id, "protocol": protocol, "body": body, "answer": said}
        with self._lock:
            self._questions.append(entry)

    def questions(self) -> list[dict[str, Any]]:
        """The questions kept, oldest first: the body of ``GET /v1/questions``'s list."""
        with self._lock:
            return list(self._questions)

    # -- counters ----------------------------------------------------------------------

    def calls(self, run_id: str) -> int:
        """How many requests (decide and chat completions) `run_id` made (0 if none)."""
        with self._lock:
            return self._by_run.get(run_id, 0)

    def call_counts(self) -> dict[str, Any]:
        """The body of `GET /v1/calls`: `{"total": n, "by_run": {run: n}}`."""
        with self._lock:
            by_run = dict(self._by_run)
        return {"total": sum(by_run.values()), "by_run": by_run}

    # -- knobs and lifecycle -------------------------------------------------------------

    @property
    def faults(self) -> ModelFaults:
        return self._faults

    def set_faults(self, changes: Mapping[str, Any] | None = None, **more: Any) -> ModelFaults:
        """Replace the given knobs (`malformed`, `unknown_tool`, `invalid_args`, `latency`)."""
        with self._lock:
            self._faults = updated(self._faults, {**(changes or {}), **more})
            logger.info("mock model faults %s", self._faults)
            return self._faults

    def reset(self) -> None:
        """Forget every count, question and fault (a state file is emptied too)."""
        with self._lock:
            self._by_run.clear()
            self._questions.clear()
            self._served = dict.fromkeys(self._served, 0)
            self._faults = self._baseline
            self._save()
        logger.info("mock model reset")

    def _load(self) -> dict[str, int]:
        if self.state_path is None or not self.state_path.exists():
            return {}
        try:
            state = json.loads(self.state_path.read_text(encoding="utf-8"))
            by_run = state["by_run"]
            if not all(isinstance(k, str) and type(v) is int for k, v in by_run.items()):
                raise TypeError("counts must be integers")
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise ValueError(
                f"{self.state_path} is not a mock model state file ({exc}); "
                "delete it to start the counts from zero"
            ) from exc
        return dict(by_run)

    def _save(self) -> None:
        """Write the counts atomically (temp file, fsync, rename); caller holds the lock."""
        if self.state_path is None:
            return
        directory = self.state_path.parent
        directory.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".mock-model-", dir=directory)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                json.dump({"by_run": self._by_run}, out)
                out.flush()
                os.fsync(out.fileno())
            os.replace(tmp, self.state_path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
