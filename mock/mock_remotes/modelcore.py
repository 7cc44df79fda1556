"""The mock model: given a run's confirmed steps, it names the next tool call.

The plan is fixed: a server, then a database on it, then a DNS record pointing
at it, then `done`. Every name the model picks carries its call count for that
run (`srv-1`, `db-2`, `app-3.example.test`), counted before anything else, so a
step decided twice shows up in the name (`srv-2`). Counts live in memory, or in
a small JSON file (`state_path`) when they must survive a restart of the mock.

Fault knobs make the next answers bad on purpose: `malformed` (alternately
truncated JSON and JSON without "tool"), `unknown_tool`, `invalid_args`. When
several are set, they are served in that order.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal

from mock_remotes.errors import InvalidRequest
from mock_remotes.faults import ModelFaults, updated

__all__ = ["TOOLS", "Answer", "Model", "RawAnswer", "Step", "parse_request"]

logger = logging.getLogger(__name__)

TOOLS: Final = ("create_server", "create_database", "create_dns_record", "done")
UNKNOWN_TOOL: Final = "delete_everything"
_BAD_ENUM: Final = {"create_server": ("size", "gigantic"), "create_database": ("engine", "oracle")}
_TRUNCATED: Final = '{"tool": "create_server", "args": {"name": "srv-'

Fault = Literal["malformed", "unknown_tool", "invalid_args"]


@dataclass(frozen=True, kw_only=True)
class Step:
    """One confirmed step of a run's history, as the runtime sends it."""

    seq: int
    tool: str
    args: dict[str, Any]
    result: dict[str, Any]

    @classmethod
    def from_json(cls, obj: object, index: int = 0) -> Step:
        where = f"history[{index}]"
        if not isinstance(obj, dict):
            raise InvalidRequest(f"{where} must be an object with seq, tool, args, result")
        seq, tool, args, result = (obj.get(k) for k in ("seq", "tool", "args", "result"))
        if isinstance(seq, bool) or not isinstance(seq, int):
            raise InvalidRequest(f"{where}.seq must be an integer")
        if not isinstance(tool, str):
            raise InvalidRequest(f"{where}.tool must be a string")
        if not isinstance(args, dict) or not isinstance(result, dict):
            raise InvalidRequest(f"{where}.args and {where}.result must be objects")
        return cls(seq=seq, tool=tool, args=args, result=result)


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


@dataclass(frozen=True)
class RawAnswer:
    """An answer body that is not JSON at all (a malformed fault)."""

    text: str


Answer = dict[str, Any] | RawAnswer


def _first(history: Sequence[Step], tool: str) -> Step | None:
    return next((step for step in history if step.tool == tool), None)


def _reference(step: Step, field: str) -> str:
    value = step.result.get(field)
    if not isinstance(value, str) or not value:
        raise InvalidRequest(f"the {step.tool} step (seq {step.seq}) has no result {field!r}")
    return value


def _plan(history: Sequence[Step]) -> tuple[str, dict[str, str]]:
    """The next tool and what its arguments refer to (validated before counting)."""
    server = _first(history, "create_server")
    if server is None:
        return "create_server", {}
    if _first(history, "create_database") is None:
        return "create_database", {"server_id": _reference(server, "id")}
    if _first(history, "create_dns_record") is None:
        return "create_dns_record", {"value": _reference(server, "ip")}
    return "done", {}


def _decision(tool: str, refs: Mapping[str, str], n: int) -> dict[str, Any]:
    if tool == "create_server":
        args = {"name": f"srv-{n}", "size": "small", "region": "local-1"}
    elif tool == "create_database":
        args = {"name": f"db-{n}", "engine": "postgres", "server_id": refs["server_id"]}
    elif tool == "create_dns_record":
        args = {"name": f"app-{n}.example.test", "type": "A", "value": refs["value"]}
    else:
        args = {}
    return {"tool": tool, "args": args}


def _spoiled(decision: dict[str, Any], fault: Fault, served: int) -> Answer:
    """`decision` made bad by `fault`; `served` alternates the two flavours of each."""
    if fault == "unknown_tool":
        return {"tool": UNKNOWN_TOOL, "args": {}}
    if fault == "malformed":
        if served % 2 == 0:
            return RawAnswer(_TRUNCATED)
        return {"args": decision["args"], "thought": "I forgot to name a tool"}
    tool, args = decision["tool"], dict(decision["args"])
    if tool == "done":
        args["force"] = True
    elif served % 2 == 0:
        field, bad = _BAD_ENUM.get(tool, ("type", "MX"))
        args[field] = bad
    else:
        del args["name"]
    return {"tool": tool, "args": args}


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

    # -- deciding --------------------------------------------------------------------

    def decide(
        self,
        run_id: str,
        history: Sequence[Step],
        *,
        wait: Callable[[float], None] = time.sleep,
    ) -> Answer:
        """Count the call, then name the next tool (possibly spoiled by a fault knob)."""
        tool, refs = _plan(history)
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
        decision = _decision(tool, refs, n)
        if fault is None:
            logger.debug("mock model run=%s call=%d decided %s", run_id, n, decision)
            return decision
        logger.info("mock model run=%s call=%d answers with fault %s", run_id, n, fault)
        return _spoiled(decision, fault, served)

    def _take_fault(self) -> Fault | None:
        for fault in ("malformed", "unknown_tool", "invalid_args"):
            left: int = getattr(self._faults, fault)
            if left > 0:
                self._faults = updated(self._faults, {fault: left - 1})
                return fault
        return None

    # -- counters ----------------------------------------------------------------------

    def calls(self, run_id: str) -> int:
        """How many decide requests `run_id` made (0 if none)."""
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
        """Forget every count and fault (a state file is emptied too)."""
        with self._lock:
            self._by_run.clear()
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
