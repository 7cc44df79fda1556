"""The two mock remotes as the schedule runner sees them: in-process, or over HTTP.

Both faces answer the same questions (what the cloud holds, how often the model
was asked) and turn the same knobs, so the runner above them is one piece of code.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import httpx

from mock_remotes import Cloud, Model, cloud_transport, model_transport, run_of, start_mocks

CLOUD_KNOBS: Final = ("fail_before", "drop_after", "latency")
MODEL_KNOBS: Final = ("malformed", "unknown_tool", "invalid_args")


def scratch_dir(prefix: str) -> Path:
    """A private directory, in memory when the machine has /dev/shm (no fsync cost)."""
    shm = Path("/dev/shm")
    parent = str(shm) if shm.is_dir() else None
    return Path(tempfile.mkdtemp(prefix=prefix, dir=parent))


@dataclass(frozen=True, kw_only=True)
class CloudRow:
    """One key the cloud acted on."""

    key: str
    run: str
    kind: str
    id: str
    args: dict[str, Any]
    result: dict[str, Any]
    generation: int | None


@dataclass(frozen=True, kw_only=True)
class CloudAnswer:
    """What the cloud answered one mutating request (``mock_remotes.Answer``)."""

    seq: int
    key: str
    run: str
    generation: int | None
    answer: str  # created, already_done, or the refusal's error code
    dropped: bool  # the drop_after knob lost it on the way back


def _answer(obj: dict[str, Any]) -> CloudAnswer:
    return CloudAnswer(
        seq=obj["seq"],
        key=obj["key"],
        run=run_of(obj["key"]),
        generation=obj["generation"],
        answer=obj["answer"],
        dropped=obj["dropped"],
    )


def _row(record: dict[str, Any]) -> CloudRow:
    return CloudRow(
        key=record["key"],
        run=run_of(record["key"]),
        kind=record["kind"],
        id=record["id"],
        args=record["args"],
        result=record["result"],
        generation=record["generation"],
    )


class Remotes(ABC):
    cloud_url: str
    model_url: str

    @abstractmethod
    def reset(self) -> None: ...

    @abstractmethod
    def model_calls(self, run: str) -> int: ...

    @abstractmethod
    def all_model_calls(self) -> dict[str, int]: ...

    @abstractmethod
    def cloud_rows(self) -> list[CloudRow]: ...

    @abstractmethod
    def cloud_answers(self) -> list[CloudAnswer]: ...

    @abstractmethod
    def cloud_faults(self) -> dict[str, float]: ...

    @abstractmethod
    def set_cloud_faults(self, **knobs: float) -> None: ...

    @abstractmethod
    def model_faults(self) -> dict[str, float]: ...

    @abstractmethod
    def set_model_faults(self, **knobs: float) -> None: ...

    def close(self) -> None:
        return None


class InProcessRemotes(Remotes):
    """The cores themselves, reached through socket-free transports."""

    cloud_url = "http://cloud"
    model_url = "http://model"

    def __init__(self) -> None:
        self._dir = scratch_dir("properties-cloud-")
        self.cloud = Cloud(self._dir / "cloud.sqlite3", synchronous="OFF")
        self.model = Model()
        self.cloud_transport = cloud_transport(self.cloud)
        self.model_transport = model_transport(self.model)
        self._rows: list[CloudRow] = []  # what the cloud holds, read incrementally
        self._rows_seq = 0
        self._answers: list[CloudAnswer] = []

    def reset(self) -> None:
        self.cloud.reset()
        self.model.reset()
        self._rows = []
        self._rows_seq = 0
        self._answers = []

    def model_calls(self, run: str) -> int:
        return self.model.calls(run)

    def all_model_calls(self) -> dict[str, int]:
        by_run: dict[str, int] = self.model.call_counts()["by_run"]
        return by_run

    def cloud_rows(self) -> list[CloudRow]:
        """Every record, reading only the new ones: a record never changes once made."""
        for seq, record in self.cloud.records_after(self._rows_seq):
            self._rows.append(_row(record.to_json()))
            self._rows_seq = seq
        return list(self._rows)

    def cloud_answers(self) -> list[CloudAnswer]:
        """Every answer, reading only the new ones: the log only grows."""
        after = self._answers[-1].seq if self._answers else 0
        self._answers += [_answer(a.to_json()) for a in self.cloud.answers(after=after)]
        return list(self._answers)

    def cloud_faults(self) -> dict[str, float]:
        return {k: getattr(self.cloud.faults, k) for k in CLOUD_KNOBS}

    def set_cloud_faults(self, **knobs: float) -> None:
        self.cloud.set_faults(knobs)

    def model_faults(self) -> dict[str, float]:
        return {k: getattr(self.model.faults, k) for k in MODEL_KNOBS}

    def set_model_faults(self, **knobs: float) -> None:
        self.model.set_faults(knobs)

    def close(self) -> None:
        self.cloud.close()
        shutil.rmtree(self._dir, ignore_errors=True)


class HttpRemotes(Remotes):
    """Both mocks as uvicorn processes (``mock_remotes.start_mocks``), over HTTP."""

    def __init__(self) -> None:
        self._dir = scratch_dir("properties-mocks-")
        self.servers = start_mocks(self._dir, persist_model=False)
        self.cloud_url = self.servers.cloud_url
        self.model_url = self.servers.model_url
        self._http = httpx.Client(timeout=10.0)

    def _get(self, url: str) -> Any:
        response = self._http.get(url)
        response.raise_for_status()
        return response.json()

    def _post(self, url: str, body: dict[str, Any]) -> None:
        self._http.post(url, json=body).raise_for_status()

    def reset(self) -> None:
        self.servers.reset()

    def model_calls(self, run: str) -> int:
        calls: int = self._get(f"{self.model_url}/v1/calls/{run}")["calls"]
        return calls

    def all_model_calls(self) -> dict[str, int]:
        by_run: dict[str, int] = self._get(f"{self.model_url}/v1/calls")["by_run"]
        return by_run

    def cloud_rows(self) -> list[CloudRow]:
        return [_row(r) for r in self._get(f"{self.cloud_url}/v1/resources")["resources"]]

    def cloud_answers(self) -> list[CloudAnswer]:
        return [_answer(a) for a in self._get(f"{self.cloud_url}/v1/answers")["answers"]]

    def cloud_faults(self) -> dict[str, float]:
        knobs = self._get(f"{self.cloud_url}/admin/faults")
        return {k: knobs[k] for k in CLOUD_KNOBS}

    def set_cloud_faults(self, **knobs: float) -> None:
        self._post(f"{self.cloud_url}/admin/faults", dict(knobs))

    def model_faults(self) -> dict[str, float]:
        knobs = self._get(f"{self.model_url}/admin/faults")
        return {k: knobs[k] for k in MODEL_KNOBS}

    def set_model_faults(self, **knobs: float) -> None:
        self._post(f"{self.model_url}/admin/faults", dict(knobs))

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._http.close()
        self.servers.stop()
        shutil.rmtree(self._dir, ignore_errors=True)
