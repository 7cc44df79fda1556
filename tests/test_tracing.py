"""Traces: a run is one trace, across a crash; each step a span, its phases children.

A worker crashes (the crash point's in-process action, a BaseException, as a process
death) after step 1's remote acted and before its confirm; a second worker resumes the
run. The SDK's in-memory exporter holds what both lives exported.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from agent_runtime.config import Settings
from agent_runtime.crash import CrashPlan, InjectedCrash, raise_crash
from agent_runtime.loop.worker import Worker
from agent_runtime.observe import tracing
from agent_runtime.store.journal import Journal
from mock_remotes import Cloud, Model, cloud_transport, model_transport

RUN = "traced"


@pytest.fixture
def exported(monkeypatch: pytest.MonkeyPatch) -> Iterator[InMemorySpanExporter]:
    """Spans of this test only: a provider of its own, not the process's global one."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    monkeypatch.setattr(tracing, "provider", provider)
    yield exporter
    provider.shutdown()


def _worker(conn: Any, cloud: Cloud, model: Model, crash: CrashPlan) -> Worker:
    return Worker.build(
        Journal(conn),
        Settings(cloud_url="http://cloud", model_url="http://model"),
        model_transport=model_transport(model),
        cloud_transport=cloud_transport(cloud),
        crash=crash,
    )


def _attr(span: ReadableSpan, name: str) -> Any:
    assert span.attributes is not None
    return span.attributes.get(tracing.PREFIX + name)


def _children(spans: list[ReadableSpan], parent: ReadableSpan) -> list[str]:
    return [
        s.name
        for s in sorted(spans, key=lambda s: s.start_time or 0)
        if s.parent is not None and s.parent.span_id == parent.context.span_id
    ]


def test_a_crashed_and_resumed_run_is_one_trace_with_the_spans_of_both_lives(
    conn: Any, tmp_path: Path, exported: InMemorySpanExporter
) -> None:
    with Cloud(tmp_path / "cloud.sqlite3") as cloud:
        model = Model()
        crash = CrashPlan(point="after_call", seq=1, action=raise_crash)
        first = _worker(conn, cloud, model, crash)
        with pytest.raises(InjectedCrash):
            first.run(RUN)
        first.close_clients()
        second = _worker(conn, cloud, model, CrashPlan())
        assert second.run(RUN, takeover=True).status == "done"
        second.close_clients()
    spans = sorted(exported.get_finished_spans(), key=lambda s: s.start_time or 0)

    # One trace, its id derived from the run id; every step hangs from the same root.
    assert {s.context.trace_id for s in spans} == {tracing.trace_id_of(RUN)}
    steps = [s for s in spans if s.name == "step"]
    assert len({s.parent.span_id for s in steps if s.parent is not None}) == 1
    assert all(s.parent is not None and s.parent.is_remote for s in steps)
    lives = sorted({_attr(s, "generation") for s in steps})
    assert len(lives) == 2
    one, two = lives
    assert [(_attr(s, "generation"), _attr(s, "seq")) for s in steps] == [
        (one, 0),
        (one, 1),  # crashed after its call
        (two, 1),  # finished by the restart: the call re-sent under its key, confirmed
        (two, 2),
        (two, 3),  # the final answer
    ]
    assert all(_attr(s, "run_id") == RUN for s in spans)

    phases = [_children(spans, s) for s in steps]
    assert phases == [
        ["decide", "intent", "call", "confirm"],
        ["decide", "intent", "call"],
        ["call", "confirm"],
        ["decide", "intent", "call", "confirm"],
        ["decide"],
    ]
    crashed = steps[1]
    assert crashed.status.status_code == StatusCode.ERROR
    assert "InjectedCrash" in (crashed.status.description or "")

    life_of = {s.context.span_id: _attr(s, "generation") for s in steps}
    calls = {
        (life_of[s.parent.span_id], _attr(s, "seq")): s
        for s in spans
        if s.name == "call" and s.parent is not None
    }
    for life, status in ((one, "created"), (two, "already_done")):
        call = calls[life, 1]
        assert _attr(call, "key") == f"{RUN}:1"
        assert _attr(call, "effect") == "keyed"
        assert _attr(call, "remote_status") == status
    confirm = next(s for s in spans if s.name == "confirm" and _attr(s, "seq") == 1)
    assert (_attr(confirm, "key"), _attr(confirm, "remote_status")) == (f"{RUN}:1", "already_done")
    intent = next(s for s in spans if s.name == "intent" and _attr(s, "seq") == 2)
    assert (_attr(intent, "key"), _attr(intent, "effect")) == (f"{RUN}:2", "keyed")


def test_without_the_api_a_span_is_the_shared_no_op() -> None:
    probe = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; sys.modules['opentelemetry'] = None\n"
            "from agent_runtime.observe import tracing\n"
            "span = tracing.span('step', 'r', 0, key='r:0')\n"
            "with span as entered:\n"
            "    entered.set('remote_status', 'created')\n"
            "assert span is tracing.NO_SPAN and tracing._api is None\n",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert probe.returncode == 0, probe.stderr
