"""The mock remotes as the schedule runner sees them: in-process, or over HTTP.

Three remotes: the cloud (keyed resources), the support desk (orders to read, keyed
tickets, an email outbox that delivers every send) and the model. Both faces answer the
same questions (what the remotes hold, what they answered whom, how often the model was
asked) and turn the same knobs, so the runner above them is one piece of code.

A record the remotes hold is an :class:`EffectRow` (a cloud resource, a ticket, a
delivered email); every answer to a request that acts or checks is an :class:`Answer`,
with the request's fencing generation, from the log each remote keeps in order.
"""

from __future__ import annotations

import contextlib
import dataclasses
import shutil
import tempfile
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import httpx

from mock_remotes import (
    Cloud,
    Model,
    Support,
    cloud_transport,
    model_transport,
    run_of,
    start_mocks,
    support_transport,
)
from mock_remotes.inflight import Holding

CLOUD_KNOBS: Final = ("fail_before", "drop_after", "latency", "hold_next")
MODEL_KNOBS: Final = ("malformed", "unknown_tool", "invalid_args")
# The desk's answers, in the words of the runtime's remote statuses; lookups are left out
# (a read is not an effect, and its log names the order, not the call).
DESK_ANSWER: Final = {
    "file_ticket": {"created": "created", "already_done": "already_done"},
    "send_email": {"delivered": "created"},
    "check_message": {"present": "found", "absent": "absent"},
}


def scratch_dir(prefix: str) -> Path:
    """A private directory, in memory when the machine has /dev/shm (no fsync cost)."""
    shm = Path("/dev/shm")
    parent = str(shm) if shm.is_dir() else None
    return Path(tempfile.mkdtemp(prefix=prefix, dir=parent))


@dataclass(frozen=True, kw_only=True)
class EffectRow:
    """One record a remote holds: a cloud resource, a ticket, or one delivery of an email
    (an email sent twice is two records under one key)."""

    key: str
    run: str
    kind: str
    id: str
    args: dict[str, Any]
    result: dict[str, Any]
    generation: int | None


@dataclass(frozen=True, kw_only=True)
class Answer:
    """What a remote answered one request that acts or checks, in its log's order."""

    remote: str  # "cloud" or "desk": each numbers its own log
    seq: int
    key: str
    run: str
    generation: int | None
    answer: str  # created, already_done, found, absent, or the refusal's error code
    dropped: bool  # the drop_after knob lost it on the way back


def _answer(obj: dict[str, Any]) -> Answer:
    return Answer(
        remote="cloud",
        seq=obj["seq"],
        key=obj["key"],
        run=run_of(obj["key"]),
        generation=obj["generation"],
        answer=obj["answer"],
        dropped=obj["dropped"],
    )


def _desk_answer(obj: dict[str, Any]) -> Answer | None:
    words = DESK_ANSWER.get(obj["op"])
    if words is None or ":" not in obj["ref"]:
        return None
    return Answer(
        remote="desk",
        seq=obj["seq"],
        key=obj["ref"],
        run=run_of(obj["ref"]),
        generation=obj.get("generation"),
        answer=words.get(obj["answer"], obj["answer"]),
        dropped=obj["dropped"],
    )


def _row(record: dict[str, Any]) -> EffectRow:
    return EffectRow(
        key=record["key"],
        run=run_of(record["key"]),
        kind=record["kind"],
        id=record["id"],
        args=record["args"],
        result=record["result"],
        generation=record["generation"],
    )


def _ticket(ticket: dict[str, Any]) -> EffectRow:
    return EffectRow(
        key=ticket["key"],
        run=run_of(ticket["key"]),
        kind="ticket",
        id=ticket["id"],
        args=ticket["args"],
        result=ticket["result"],
        generation=None,
    )


def _delivery(email: dict[str, Any]) -> EffectRow:
    return EffectRow(
        key=email["message_id"],
        run=run_of(email["message_id"]),
        kind="email",
        id=email["id"],
        args={k: email[k] for k in ("to", "subject", "body")},
        result=email,
        generation=None,
    )


def desk_rows(tickets: list[dict[str, Any]], emails: list[dict[str, Any]]) -> list[EffectRow]:
    return [_ticket(t) for t in tickets] + [_delivery(m) for m in emails]


class Remotes(ABC):
    cloud_url: str
    model_url: str
    support_url: str

    @abstractmethod
    def reset(self) -> None: ...

    @abstractmethod
    def model_calls(self, run: str) -> int: ...

    @abstractmethod
    def all_model_calls(self) -> dict[str, int]: ...

    @abstractmethod
    def cloud_rows(self) -> list[EffectRow]: ...

    @abstractmethod
    def cloud_answers(self) -> list[Answer]: ...

    @abstractmethod
    def desk_rows(self) -> list[EffectRow]:
        """Every ticket and every delivery the desk holds."""

    @abstractmethod
    def desk_log(self) -> list[dict[str, Any]]:
        """Every answer the desk gave, a lookup's too, in order (``properties.reads``)."""

    def desk_answers(self) -> list[Answer]:
        """Every answer the desk gave a ticket, a send or a check, in order."""
        return [a for a in map(_desk_answer, self.desk_log()) if a is not None]

    def effects(self) -> list[EffectRow]:
        return self.cloud_rows() + self.desk_rows()

    def answers(self) -> list[Answer]:
        return self.cloud_answers() + self.desk_answers()

    @abstractmethod
    def cloud_faults(self) -> dict[str, float]: ...

    @abstractmethod
    def set_cloud_faults(self, **knobs: float) -> None:
        """Arm the knobs of every remote that acts: the cloud and the desk alike."""

    @abstractmethod
    def desk_faults(self) -> dict[str, float]: ...

    @abstractmethod
    def set_desk_faults(self, **knobs: float) -> None:
        """Arm a knob of the desk alone (``fail_lookups``: its reads' outage)."""

    @abstractmethod
    def model_faults(self) -> dict[str, float]: ...

    @abstractmethod
    def set_model_faults(self, **knobs: float) -> None: ...

    @abstractmethod
    def held(self, remote: str) -> list[dict[str, Any]]:
        """The requests ``remote`` (cloud or desk) received and has not acted on yet."""

    @abstractmethod
    def land(self, remote: str, request: int) -> list[dict[str, Any]]:
        """Act on one held request now; what it answered (nobody hears it)."""

    @abstractmethod
    def forget(self, remote: str, request: int) -> None:
        """Drop a held request for good: it never acts."""

    def close(self) -> None:
        return None


class InProcessRemotes(Remotes):
    """The cores themselves, reached through socket-free transports."""

    cloud_url = "http://cloud"
    model_url = "http://model"
    support_url = "http://support"

    def __init__(self) -> None:
        self._dir = scratch_dir("properties-cloud-")
        self.cloud = Cloud(self._dir / "cloud.sqlite3", synchronous="OFF")
        self.support = Support(self._dir / "support.sqlite3", synchronous="OFF")
        self.model = Model()
        self.transports = {
            "cloud": cloud_transport(self.cloud),
            "model": model_transport(self.model),
            "support": support_transport(self.support),
        }
        self._rows: list[EffectRow] = []  # what the cloud holds, read incrementally
        self._rows_seq = 0
        self._answers: list[Answer] = []

    def reset(self) -> None:
        self.cloud.reset()
        self.support.reset()
        self.model.reset()
        self._rows = []
        self._rows_seq = 0
        self._answers = []

    def model_calls(self, run: str) -> int:
        return self.model.calls(run)

    def all_model_calls(self) -> dict[str, int]:
        by_run: dict[str, int] = self.model.call_counts()["by_run"]
        return by_run

    def cloud_rows(self) -> list[EffectRow]:
        """Every record, reading only the new ones: a record never changes once made."""
        for seq, record in self.cloud.records_after(self._rows_seq):
            self._rows.append(_row(record.to_json()))
            self._rows_seq = seq
        return list(self._rows)

    def cloud_answers(self) -> list[Answer]:
        """Every answer, reading only the new ones: the log only grows."""
        after = self._answers[-1].seq if self._answers else 0
        self._answers += [_answer(a.to_json()) for a in self.cloud.answers(after=after)]
        return list(self._answers)

    def desk_rows(self) -> list[EffectRow]:
        tickets = [t.to_json() for t in self.support.tickets()]
        return desk_rows(tickets, [d.to_json() for d in self.support.deliveries()])

    def desk_log(self) -> list[dict[str, Any]]:
        return [a.to_json() for a in self.support.answers()]

    def cloud_faults(self) -> dict[str, float]:
        return {k: getattr(self.cloud.faults, k) for k in CLOUD_KNOBS}

    def set_cloud_faults(self, **knobs: float) -> None:
        self.cloud.set_faults(knobs)
        self.support.set_faults(knobs)

    def desk_faults(self) -> dict[str, float]:
        return dataclasses.asdict(self.support.faults)

    def set_desk_faults(self, **knobs: float) -> None:
        self.support.set_faults(knobs)

    def model_faults(self) -> dict[str, float]:
        return {k: getattr(self.model.faults, k) for k in MODEL_KNOBS}

    def set_model_faults(self, **knobs: float) -> None:
        self.model.set_faults(knobs)

    def _holding(self, remote: str) -> Holding:
        return self.cloud.holding if remote == "cloud" else self.support.holding

    def held(self, remote: str) -> list[dict[str, Any]]:
        return [r.to_json() for r in self._holding(remote).held()]

    def land(self, remote: str, request: int) -> list[dict[str, Any]]:
        return self._holding(remote).land([request])

    def forget(self, remote: str, request: int) -> None:
        self._holding(remote).forget([request])

    def close(self) -> None:
        self.cloud.close()
        self.support.close()
        shutil.rmtree(self._dir, ignore_errors=True)


class HttpRemotes(Remotes):
    """The mocks as uvicorn processes (``mock_remotes.start_mocks``), over HTTP."""

    def __init__(self) -> None:
        self._dir = scratch_dir("properties-mocks-")
        self.servers = start_mocks(self._dir, persist_model=False, support=True)
        self.cloud_url = self.servers.cloud_url
        self.model_url = self.servers.model_url
        self.support_url = self.servers.support_url
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

    def cloud_rows(self) -> list[EffectRow]:
        return [_row(r) for r in self._get(f"{self.cloud_url}/v1/resources")["resources"]]

    def cloud_answers(self) -> list[Answer]:
        return [_answer(a) for a in self._get(f"{self.cloud_url}/v1/answers")["answers"]]

    def desk_rows(self) -> list[EffectRow]:
        tickets = self._get(f"{self.support_url}/v1/tickets")["tickets"]
        return desk_rows(tickets, self._get(f"{self.support_url}/v1/messages")["messages"])

    def desk_log(self) -> list[dict[str, Any]]:
        return list(self._get(f"{self.support_url}/v1/answers")["answers"])

    def cloud_faults(self) -> dict[str, float]:
        knobs = self._get(f"{self.cloud_url}/admin/faults")
        return {k: knobs[k] for k in CLOUD_KNOBS}

    def set_cloud_faults(self, **knobs: float) -> None:
        self._post(f"{self.cloud_url}/admin/faults", dict(knobs))
        self._post(f"{self.support_url}/admin/faults", dict(knobs))

    def desk_faults(self) -> dict[str, float]:
        return dict(self._get(f"{self.support_url}/admin/faults"))

    def set_desk_faults(self, **knobs: float) -> None:
        self._post(f"{self.support_url}/admin/faults", dict(knobs))

    def model_faults(self) -> dict[str, float]:
        knobs = self._get(f"{self.model_url}/admin/faults")
        return {k: knobs[k] for k in MODEL_KNOBS}

    def set_model_faults(self, **knobs: float) -> None:
        self._post(f"{self.model_url}/admin/faults", dict(knobs))

    def _base(self, remote: str) -> str:
        return self.cloud_url if remote == "cloud" else self.support_url

    def held(self, remote: str) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = self._get(f"{self._base(remote)}/admin/held")["held"]
        return found

    def land(self, remote: str, request: int) -> list[dict[str, Any]]:
        response = self._http.post(f"{self._base(remote)}/admin/land", json={"ids": [request]})
        landed: list[dict[str, Any]] = response.raise_for_status().json()["landed"]
        return landed

    def forget(self, remote: str, request: int) -> None:
        self._post(f"{self._base(remote)}/admin/forget", {"ids": [request]})

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._http.close()
        self.servers.stop()
        shutil.rmtree(self._dir, ignore_errors=True)
