"""The mock cloud's HTTP contract, as one route table over a `Cloud`.

POST /v1/servers | /v1/databases | /v1/dns_records   create (Idempotency-Key required,
                                                      percent-decoded as UTF-8)
GET  /v1/resources[?run=<run_id>]                     counts and records
GET  /v1/keys/{key}                                   one record + its request count
GET  /v1/answers[?run=<run_id>]                       every request's answer, in order
GET  /admin/faults    POST /admin/faults              the knobs
POST /admin/reset                                     forget everything
GET  /healthz                                         liveness, for launchers
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from urllib.parse import unquote

from mock_remotes._wire import Call, Reply, Router
from mock_remotes.cloudcore import Cloud
from mock_remotes.cloudrecords import PLURAL, Kind, Unreadable
from mock_remotes.errors import (
    InvalidFencingGeneration,
    InvalidRequest,
    MissingIdempotencyKey,
    UnknownKey,
)
from mock_remotes.inflight import holding_routes

__all__ = ["cloud_router"]

KEY_HEADER = "Idempotency-Key"
FENCE_HEADER = "X-Fencing-Generation"


def fencing_generation(call: Call) -> int | None:
    """The request's X-Fencing-Generation, if it sent one (a 400 if it is no integer)."""
    raw = call.header(FENCE_HEADER)
    if raw is None or not raw.strip():
        return None
    try:
        return int(raw.strip())
    except ValueError as exc:
        raise InvalidFencingGeneration(f"{FENCE_HEADER} must be an integer, got {raw!r}") from exc


def _object_body(call: Call) -> dict[str, object]:
    try:
        body = call.json() if call.body.strip() else {}
    except ValueError as exc:
        raise InvalidRequest(f"body is not JSON: {exc}") from exc
    if not isinstance(body, dict):
        raise InvalidRequest(f"body must be a JSON object, got {type(body).__name__}")
    return body


def cloud_router(cloud: Cloud) -> Router:
    """The route table serving `cloud`; used by the FastAPI app and the transport."""
    router = Router()

    def creator(kind: Kind) -> None:
        def create(call: Call, params: Mapping[str, str]) -> Reply:
            # The runtime percent-encodes what a header cannot carry (a run id like
            # "rün-日本"): keep the key as the journal has it.
            key = unquote((call.header(KEY_HEADER) or "").strip())
            if not key:
                raise MissingIdempotencyKey(f"send an {KEY_HEADER} header, e.g. 'run42:3'")
            generation = fencing_generation(call)
            try:
                args: object = call.json()
            except ValueError as exc:
                args = Unreadable(f"body is not JSON: {exc}")
            outcome = cloud.submit(kind, key, args, generation=generation, wait=call.wait)
            return Reply.of(outcome.status, outcome.body, hold=outcome.hold)

        create.__name__ = f"create_{kind}"
        create.__doc__ = f"Create a {kind} under the Idempotency-Key (201, or 200 already_done)."
        router.add("POST", f"/v1/{PLURAL[kind]}", create)

    for kind in PLURAL:
        creator(kind)

    @router.route("GET", "/v1/resources")
    def resources(call: Call, params: Mapping[str, str]) -> Reply:
        """Resource counts and records, optionally of one run (?run=<run_id>)."""
        return Reply.of(200, cloud.resources(call.query.get("run")))

    @router.route("GET", "/v1/answers")
    def answers(call: Call, params: Mapping[str, str]) -> Reply:
        """What the cloud answered every mutating request, in order (?run= for one run)."""
        found = cloud.answers(call.query.get("run") or None)
        return Reply.of(200, {"answers": [a.to_json() for a in found]})

    @router.route("GET", "/v1/keys/{key:path}")
    def key_record(call: Call, params: Mapping[str, str]) -> Reply:
        """One key's record and how many requests carried it (404 if never acted on)."""
        key = params["key"]
        record = cloud.record(key)
        requests = cloud.requests(key)
        if record is None:
            raise UnknownKey(f"the cloud never acted on key {key!r}", extra={"requests": requests})
        return Reply.of(200, {**record.to_json(), "requests": requests})

    @router.route("GET", "/admin/faults")
    def get_faults(call: Call, params: Mapping[str, str]) -> Reply:
        """The current fault and latency knobs."""
        return Reply.of(200, dataclasses.asdict(cloud.faults))

    @router.route("POST", "/admin/faults")
    def set_faults(call: Call, params: Mapping[str, str]) -> Reply:
        """Replace the given knobs: fail_before, drop_after, latency, hang."""
        cloud.set_faults(_object_body(call))
        return Reply.of(200, dataclasses.asdict(cloud.faults))

    @router.route("POST", "/admin/reset")
    def reset(call: Call, params: Mapping[str, str]) -> Reply:
        """Forget everything: resources, keys, generations, counters, faults."""
        cloud.reset()
        return Reply.of(200, {"reset": True})

    @router.route("GET", "/healthz")
    def healthz(call: Call, params: Mapping[str, str]) -> Reply:
        """Liveness."""
        return Reply.of(200, {"ok": True, "service": "mock-cloud"})

    holding_routes(router, cloud.holding)
    return router
