"""What the runtime shows the tools operators already run: Prometheus metrics
(``metrics``: counters and histograms counted where events happen, the journal's counts read
at scrape time by ``journalstats``, the endpoint) and OpenTelemetry traces (``tracing``: a
trace per run, a span per step and per phase, continued across a crash by the run id);
``steps`` is the one hook the loop wraps a step in, for both.

Neither library is needed: without ``prometheus-client`` (the ``runtime`` extra) metrics
cannot be switched on, and without ``opentelemetry-api`` (the ``otel`` extra) every hook is
a no-op that costs a function call.

May import: the base modules and ``store``; imported by ``tools``, ``llm``, ``loop`` and
``supervisor``.
"""
