"""The mock cloud: servers, databases and DNS records behind idempotency keys.

`Cloud` is the whole behaviour; the HTTP routes (`mock_remotes.cloudroutes`) only
read headers and bodies and call it. State lives in one SQLite file (WAL,
`synchronous=FULL` by default), so a new `Cloud` on the same file -- a restarted
mock -- remembers every key, result, id counter, fencing generation and request
count. Fault knobs live in memory only.

One mutating request (`Cloud.submit`) is one IMMEDIATE transaction:

1. count the request under its key (refused requests count too);
2. `fail_before` knob: refuse with 500, nothing else happens;
3. validate the arguments (422);
4. fencing: a generation lower than the run's highest served one is refused
   (409 stale_generation); otherwise the run's highest is raised to it;
5. the key: first time -> take the next id, store the record, 201 `created`;
   again with equal kind and arguments -> the stored result, 200 `already_done`;
   again with other kind or arguments -> 409 key_conflict;
6. the answer (or refusal) is logged with the request's generation, and whether the
   `drop_after` knob lost it (`Cloud.answers`, `GET /v1/answers`): the ground truth a
   client's recorded `created` / `already_done` is checked against.

Refusals commit what they did (the request count, a raised fence) before the
error is raised.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any, Literal

from mock_remotes._store import SqliteStore, Synchronous
from mock_remotes.cloudrecords import (
    KINDS,
    Answer,
    CloudRecord,
    Kind,
    Outcome,
    Unreadable,
    count_by_kind,
    created_body,
    run_of,
    validate_args,
)
from mock_remotes.errors import (
    Forgotten,
    InjectedFailure,
    KeyConflict,
    MissingIdempotencyKey,
    MockError,
    StaleGeneration,
)
from mock_remotes.faults import CloudFaults, taken, updated
from mock_remotes.inflight import Held, Holding

__all__ = [
    "KINDS",
    "Answer",
    "Cloud",
    "CloudRecord",
    "Kind",
    "Outcome",
    "Synchronous",
    "Unreadable",
    "run_of",
    "validate_args",
]

logger = logging.getLogger(__name__)


class Cloud(SqliteStore):
    """The mock cloud over one SQLite file; safe to share between threads."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        latency: float = 0.0,
        synchronous: Synchronous = "FULL",
    ) -> None:
        """Open (or create) the store at `path`.

        `latency` (seconds) is the baseline of the latency knob, restored by `reset()`.
        `synchronous` is SQLite's durability level: FULL (the default) survives a
        power cut; NORMAL and OFF still survive a crash of the mock process and are
        faster where fsync is slow, for long property runs.
        """
        super().__init__(path, "cloud.sql", synchronous)
        self._baseline = updated(CloudFaults(), {"latency": latency})
        self._faults = self._baseline
        self._epoch = 0  # resets so far: a request waiting out its latency acts in its own
        self.holding = Holding()  # requests received and not acted on yet (hold_next)
        logger.info("mock cloud store=%s synchronous=%s", self.path, synchronous)

    # -- lifecycle -------------------------------------------------------------------

    def reset(self) -> None:
        """Forget everything: records, counters, fences, request counts, faults."""
        with self._lock:
            self._db.executescript(self._sql["reset"])
            self._faults = self._baseline
            self._epoch += 1  # a request waiting out its latency now never acts
        self.holding.forget()
        logger.info("mock cloud reset store=%s", self.path)

    # -- knobs -----------------------------------------------------------------------

    @property
    def faults(self) -> CloudFaults:
        return self._faults

    def set_faults(self, changes: Mapping[str, Any] | None = None, **more: Any) -> CloudFaults:
        """Replace the given knobs (`fail_before`, `drop_after`, `latency`, `hang`)."""
        with self._lock:
            self._faults = updated(self._faults, {**(changes or {}), **more})
            logger.info("mock cloud faults %s", self._faults)
            return self._faults

    def _take(self, knob: Literal["fail_before", "drop_after"]) -> bool:
        self._faults, took = taken(self._faults, knob)
        return took

    # -- the one mutating operation ----------------------------------------------------

    def submit(
        self,
        kind: Kind,
        key: str | None,
        args: object,
        *,
        generation: int | None = None,
        wait: Callable[[float], None] = time.sleep,
    ) -> Outcome:
        """Create a `kind` under idempotency `key` (see the module docstring).

        Raises a `MockError` for every refusal. `wait` is how latency is spent.
        """
        if kind not in KINDS:
            raise ValueError(f"unknown kind {kind!r}; one of {', '.join(KINDS)}")
        if not key:
            raise MissingIdempotencyKey("send an Idempotency-Key header, e.g. 'run42:3'")
        latency, epoch = self._faults.latency, self._epoch
        if latency > 0:
            wait(latency)
        with self._lock:
            if self._epoch != epoch:
                raise Forgotten(f"the cloud was reset while key {key} waited out its latency")
            self._faults, hold = taken(self._faults, "hold_next")
            fail = not hold and self._take("fail_before")
            with self._transaction():
                self._run("count_request", key=key)
                if hold:  # received; it acts at a landing, or never
                    self._answered(key, generation, Held.code, dropped=False)
                    raise self.holding.hold(
                        kind, key, generation, lambda: self._land(kind, key, args, generation)
                    )
                try:
                    if fail:
                        raise InjectedFailure("fail_before knob: refused before acting")
                    outcome = self._apply(kind, key, validate_args(kind, args), generation)
                except MockError as exc:
                    self._answered(key, generation, exc.code, dropped=False)
                    raise
                drop = self._take("drop_after")
                self._answered(key, generation, outcome.body["status"], dropped=drop)
            if drop:
                logger.info("mock cloud drops the answer key=%s", key)
                return Outcome(status=outcome.status, body=outcome.body, hold=self._faults.hang)
            return outcome

    def _land(self, kind: Kind, key: str, args: object, generation: int | None) -> str:
        """Act on a held request now; its answer is logged as dropped (nobody hears it)."""
        with self._lock, self._transaction():
            try:
                outcome = self._apply(kind, key, validate_args(kind, args), generation)
                answer: str = outcome.body["status"]
            except MockError as exc:
                answer = exc.code
            self._answered(key, generation, answer, dropped=True)
        logger.info("mock cloud landed a held request key=%s answer=%s", key, answer)
        return answer

    def _answered(self, key: str, generation: int | None, answer: str, *, dropped: bool) -> None:
        self._run(
            "answer_insert",
            key=key,
            run=run_of(key),
            generation=generation,
            answer=answer,
            dropped=int(dropped),
        )

    def _apply(self, kind: Kind, key: str, args: dict[str, str], generation: int | None) -> Outcome:
        run = run_of(key)
        if generation is not None:
            served = self._one("fence_get", run=run)
            if served is not None and generation < served[0]:
                raise StaleGeneration(
                    f"run {run!r} is served at generation {served[0]}; {generation} is stale"
                )
            self._run("fence_raise", run=run, generation=generation)
        row = self._one("record_get", key=key)
        if row is not None:
            record = CloudRecord.from_row(row)
            if record.kind != kind or record.args != args:
                raise KeyConflict(
                    f"key {key!r} already created {record.kind} {record.id} with "
                    f"{json.dumps(record.args, sort_keys=True)}; "
                    f"now {kind} with {json.dumps(args, sort_keys=True)}"
                )
            logger.debug("mock cloud already_done key=%s id=%s", key, record.id)
            return Outcome(status=200, body={**record.result, "status": "already_done"})
        number = self._one("counter_next", kind=kind)
        assert number is not None
        result = created_body(kind, number[0], args)
        self._run(
            "record_insert",
            key=key,
            run=run,
            kind=kind,
            id=result["id"],
            args=json.dumps(args, sort_keys=True),
            result=json.dumps(result),
            generation=generation,
            created_at=datetime.now(UTC).isoformat(timespec="microseconds"),
        )
        logger.info("mock cloud created %s id=%s key=%s", kind, result["id"], key)
        return Outcome(status=201, body=result)

    # -- reads -------------------------------------------------------------------------

    def record(self, key: str) -> CloudRecord | None:
        """What `key` created, or None if the cloud never acted on it."""
        with self._lock:
            row = self._one("record_get", key=key)
        return None if row is None else CloudRecord.from_row(row)

    def requests(self, key: str) -> int:
        """How many mutating requests carried `key` (repeats and refusals included)."""
        with self._lock:
            row = self._one("request_count", key=key)
        return 0 if row is None else int(row[0])

    def answers(self, run: str | None = None, *, after: int = 0) -> list[Answer]:
        """Every mutating request's answer in the order given, or only those of ``run``;
        ``after``: only the answers after that ``seq`` (a reader that keeps up)."""
        with self._lock:
            if after:
                rows = self._db.execute(self._sql["answers_after"], {"after": after}).fetchall()
            elif run is None:
                rows = self._db.execute(self._sql["answers_all"]).fetchall()
            else:
                rows = self._db.execute(self._sql["answers_of_run"], {"run": run}).fetchall()
        found = [Answer.from_row(row) for row in rows]
        return found if run is None else [a for a in found if run_of(a.key) == run]

    def records_after(self, seq: int) -> list[tuple[int, CloudRecord]]:
        """The records created after creation number ``seq``, with their numbers."""
        with self._lock:
            rows = self._db.execute(self._sql["records_after"], {"after": seq}).fetchall()
        return [(row["seq"], CloudRecord.from_row(row)) for row in rows]

    def generation(self, run: str) -> int | None:
        """The highest fencing generation served for `run`, if any."""
        with self._lock:
            row = self._one("fence_get", run=run)
        return None if row is None else int(row[0])

    def records(self, run: str | None = None) -> list[CloudRecord]:
        """Every record in creation order, or only those of `run`."""
        with self._lock:
            if run is None:
                rows = self._db.execute(self._sql["records_all"]).fetchall()
            else:
                rows = self._db.execute(self._sql["records_of_run"], {"run": run}).fetchall()
        return [CloudRecord.from_row(row) for row in rows]

    def counts(self, run: str | None = None) -> dict[str, int]:
        """`{"servers": n, "databases": n, "dns_records": n}`."""
        return count_by_kind(self.records(run))

    def resources(self, run: str | None = None) -> dict[str, Any]:
        """The body of `GET /v1/resources`."""
        records = self.records(run)
        return {
            "counts": count_by_kind(records),
            "total": len(records),
            "resources": [record.to_json() for record in records],
        }
