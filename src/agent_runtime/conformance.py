"""Run the runtime under ``crashresume.conform``: every cloud call becomes a ``ctx.effect``.

    from crashresume import conform
    from agent_runtime.conformance import RuntimeSubject

    report = conform(lambda ctx: RuntimeSubject(ctx, url, cloud_transport(cloud),
                                                model_transport(model)),
                     inputs=["a", "b"])

Each input is one agent run (``<ctx.run_id>/<input>``, so scenarios never share
a run). The cloud transport is wrapped so that a request is recorded through
``ctx.effect(tool path, args, key=Idempotency-Key, perform=...)``: the harness
crashes the subject right before or right after the remote acted, and a repeat
of a key is answered from the harness's record as ``already_done``, exactly as
the real cloud answers. ``state()`` is the run's confirmed tools and arguments.
"""

from __future__ import annotations

import json
from typing import Any

import httpx

from . import db
from .config import Settings
from .journal import Journal
from .worker import Worker


class EffectTransport(httpx.BaseTransport):
    """Routes every mutating request through ``ctx.effect``; the inner transport acts."""

    def __init__(self, ctx: Any, inner: httpx.BaseTransport) -> None:
        self._ctx = ctx
        self._inner = inner

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        key = request.headers.get("Idempotency-Key")
        if request.method != "POST" or key is None:
            return self._inner.handle_request(request)
        body = request.read()
        args = json.dumps(json.loads(body), sort_keys=True)
        performed: list[bool] = []

        def perform() -> tuple[int, bytes]:
            response = self._inner.handle_request(request)
            performed.append(True)
            return response.status_code, response.read()

        status, content = self._ctx.effect(request.url.path, args, key=key, perform=perform)
        if not performed and status in (200, 201):  # the harness remembered this key
            answer = json.loads(content)
            answer["status"] = "already_done"
            return httpx.Response(200, json=answer, request=request)
        return httpx.Response(status, content=content, request=request)


class RuntimeSubject:
    """A conform subject: ``step(input)`` drives one agent run to done."""

    def __init__(
        self,
        ctx: Any,
        url: str,
        cloud: httpx.BaseTransport,
        model: httpx.BaseTransport,
        *,
        worker_class: type[Worker] = Worker,
    ) -> None:
        self.ctx = ctx
        self.worker = worker_class.open(
            Settings(database_url=url, retry_backoff=0.0),
            url,
            model_transport=model,
            cloud_transport=EffectTransport(ctx, cloud),
            heartbeat=False,
        )

    def run_id(self, job: str) -> str:
        return f"{self.ctx.run_id}/{job}"

    def step(self, job: str) -> None:
        # A restart is a new process in spirit: the previous owner is dead for certain.
        self.worker.run(self.run_id(job), takeover=True)

    def state(self) -> dict[str, list[tuple[str, str]]]:
        journal: Journal = self.worker.journal
        rows = db.run(journal.conn, "confirmed_steps_under", {"prefix": f"{self.ctx.run_id}/"})
        state: dict[str, list[tuple[str, str]]] = {}
        for row in rows:
            job = row["run_id"].split("/", 1)[1]
            state.setdefault(job, []).append((row["tool"], json.dumps(row["args"], sort_keys=True)))
        return state

    def close(self) -> None:
        self.worker.close()
