"""Prometheus metrics: what happened (counted where it happens) and what the journal holds
(read at scrape time, :mod:`agent_runtime.observe.journalstats`).

Counted where it happens::

    agent_runtime_claims_total{reason}      the supervisor's claims (run_claims.reason)
    agent_runtime_takeovers_total           claims of a run another owner held (expired)
    agent_runtime_give_ups_total            runs the supervisor failed (give_up_exhausted)
    agent_runtime_fenced_writes_total       a worker fenced: the run was taken or cancelled
    agent_runtime_step_seconds              a step that did work, decide to confirm
    agent_runtime_model_call_seconds        one answered model call (with its retries)

Read at scrape time: ``agent_runtime_runs{status}``, ``agent_runtime_runs_parked``,
``agent_runtime_calls_in_doubt{effect}``, ``agent_runtime_journal_up``, and from the
supervisor itself ``agent_runtime_pool_workers`` and ``agent_runtime_pool_busy_workers``.

Steps, model calls and fences happen in worker processes, not in the supervisor that
serves the endpoint. They are counted with prometheus_client's multiprocess mode: every
process writes its own counts to a file in one directory (``PROMETHEUS_MULTIPROC_DIR``;
the supervisor makes a private one unless it is set) and a scrape sums the files. A worker
that dies keeps what it counted (its file stays), which neither a report over the pool's
pipe (lost with a crash, absent in ``fork`` and ``exec`` modes) nor a count derived from
the journal (pruned runs take theirs away: a counter would go down) would. ``exec``
workers (fresh interpreters) count nothing: only forked workers inherit the switch.

Nothing is counted until :func:`enable` (the supervisor's ``--metrics-port``): every hook
is then a check of one global.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from agent_runtime.errors import ConfigError
from agent_runtime.observe.journalstats import JournalCollector

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry
    from prometheus_client.metrics_core import Metric

log = logging.getLogger(__name__)

HOST = "127.0.0.1"  # the endpoint listens on loopback only
MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"  # prometheus_client's own variable
TAKEOVER_REASONS = frozenset({"expired", "owner_dead", "forced"})  # another owner held it
# seconds: a step is three journal writes and two remote calls; a model call one request
STEP_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
MODEL_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)


def parse_port(raw: str, *, option: str) -> int:
    """A TCP port, 0 for one the system picks; anything else is a :class:`ConfigError`."""
    try:
        port = int(raw)
    except ValueError:
        port = -1
    if not 0 <= port <= 65535:
        raise ConfigError(f"{option} must be a port number from 0 to 65535, got {raw!r}")
    return port


class _Events:
    """The metric objects of the events, made once metrics are on (in multiprocess mode:
    made before any worker is forked, so every worker counts into a file of its own)."""

    def __init__(self) -> None:
        from prometheus_client import Counter, Histogram

        self.claims = Counter(
            "agent_runtime_claims", "runs claimed, by reason", ["reason"], registry=None
        )
        self.takeovers = Counter(
            "agent_runtime_takeovers", "claims of a run whose owner's lease ran out", registry=None
        )
        self.give_ups = Counter(
            "agent_runtime_give_ups", "runs failed after too many attempts", registry=None
        )
        self.fenced = Counter(
            "agent_runtime_fenced_writes",
            "workers stopped by fencing: a journal write or ownership check refused because "
            "the run was taken over or cancelled",
            registry=None,
        )
        self.steps = Histogram(
            "agent_runtime_step_seconds", "steps that did work", buckets=STEP_BUCKETS, registry=None
        )
        self.model_calls = Histogram(
            "agent_runtime_model_call_seconds",
            "answered model calls",
            buckets=MODEL_BUCKETS,
            registry=None,
        )


_events: _Events | None = None


def count_claim(reason: str) -> None:
    if _events is not None:
        _events.claims.labels(reason).inc()
        if reason in TAKEOVER_REASONS:
            _events.takeovers.inc()


def count_give_up() -> None:
    if _events is not None:
        _events.give_ups.inc()


def count_fenced() -> None:
    if _events is not None:
        _events.fenced.inc()


def observe_step(seconds: float) -> None:
    if _events is not None:
        _events.steps.observe(seconds)


def observe_model_call(seconds: float) -> None:
    if _events is not None:
        _events.model_calls.observe(seconds)


def enabled() -> bool:
    return _events is not None


def enable(directory: str | None = None) -> str:
    """Count events from here on, in this process and every process it forks later, into
    ``directory`` (one file per process; it must exist and hold no other run's files). Its
    path is set as ``PROMETHEUS_MULTIPROC_DIR`` for the collector and exec'd children."""
    global _events
    if _events is not None:
        return os.environ[MULTIPROC_ENV]
    try:
        from prometheus_client import values
    except ImportError as exc:
        raise ConfigError(
            "metrics need prometheus-client: pip install 'crashresume[runtime]'"
        ) from exc
    if directory is not None:
        os.environ[MULTIPROC_ENV] = directory
    directory = os.environ[MULTIPROC_ENV]
    if not getattr(values.ValueClass, "_multiprocess", False):
        # prometheus_client picks its value class when first imported, from this same
        # variable; imported earlier without it, it is switched here, before any metric.
        values.ValueClass = values.MultiProcessValue()  # type: ignore[no-untyped-call]
    _events = _Events()
    return directory


class PoolCollector:
    """The supervisor's pool as it is at scrape time: ``counts()`` -> (workers, busy)."""

    def __init__(self, counts: Callable[[], tuple[int, int]]) -> None:
        self.counts = counts

    def describe(self) -> list[Metric]:
        return []

    def collect(self) -> Iterator[Metric]:
        from prometheus_client.core import GaugeMetricFamily

        workers, busy = self.counts()
        yield GaugeMetricFamily(
            "agent_runtime_pool_workers", "worker processes alive", value=workers
        )
        yield GaugeMetricFamily(
            "agent_runtime_pool_busy_workers", "workers holding a run", value=busy
        )


def registry(url: str, pool: Callable[[], tuple[int, int]] | None = None) -> CollectorRegistry:
    """The project's registry: the events of every process counting into
    ``PROMETHEUS_MULTIPROC_DIR`` (when set), the journal's counts, and ``pool``'s."""
    from prometheus_client import CollectorRegistry
    from prometheus_client.multiprocess import MultiProcessCollector

    found = CollectorRegistry(auto_describe=False)
    if os.environ.get(MULTIPROC_ENV):
        MultiProcessCollector(found)  # type: ignore[no-untyped-call]
    found.register(JournalCollector(url))
    if pool is not None:
        found.register(PoolCollector(pool))
    return found


def asgi_app(url: str) -> Any:
    """The metrics as an ASGI app, to mount in another server (``app.mount("/metrics",
    asgi_app(url))``): the journal's counts, and the events of the supervisors that share
    this process's ``PROMETHEUS_MULTIPROC_DIR``, if set."""
    from prometheus_client import make_asgi_app

    return make_asgi_app(registry(url))


class Endpoint:
    """The supervisor's ``/metrics`` on :data:`HOST`, in a thread of its own."""

    def __init__(self, url: str, port: int, pool: Callable[[], tuple[int, int]]) -> None:
        """Switch counting on and listen on ``port`` (0: one the system picks, see
        :attr:`port`). The directory of the counts is private to this supervisor and removed
        by :meth:`close`, unless ``PROMETHEUS_MULTIPROC_DIR`` names one (then the operator
        empties it between runs, as prometheus_client asks)."""
        try:
            from prometheus_client import start_http_server
        except ImportError as exc:
            raise ConfigError(
                "metrics need prometheus-client: pip install 'crashresume[runtime]'"
            ) from exc

        given = os.environ.get(MULTIPROC_ENV)
        if given and not os.path.isdir(given):
            raise ConfigError(f"{MULTIPROC_ENV}={given!r} is not a directory")
        self._made = None if given else tempfile.mkdtemp(prefix="agent_runtime-metrics-")
        try:
            enable(given or self._made)
            self.server, self.thread = start_http_server(port, HOST, registry(url, pool))
        except OSError as exc:
            self.close()
            raise ConfigError(f"--metrics-port {port}: cannot listen on {HOST}: {exc}") from exc
        except BaseException:
            self.close()
            raise
        self.port: int = self.server.server_port
        log.info("metrics address=%s port=%d directory=%s", HOST, self.port, given or self._made)

    def close(self) -> None:
        server = getattr(self, "server", None)
        if server is not None:
            server.shutdown()
            server.server_close()
        if self._made is not None:
            shutil.rmtree(self._made, ignore_errors=True)
