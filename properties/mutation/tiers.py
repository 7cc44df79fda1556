"""The two tiers of mutation testing: what the protocol suite kills, and what its tests do.

Every named SQL statement of ``src/agent_runtime/sql`` (the schema script aside) and every
mutated Python module is in exactly one tier (``properties/test_mutation.py`` checks it):

- **protocol**: the journal, the claim, the lease, the fence, acting, deciding, stopping,
  the outcome, the supervisor -- killed by :mod:`properties.mutation.check` (the small
  scope, then the ``ci`` exploration; ``--pool`` for the supervisor's modules);
- **tests**: code the protocol's schedules never run, or run only in a state they never
  have -- retention, the schema check of a fresh or unversioned database, local cluster
  creation and its password, the metrics scrape, the operator's lists (their page
  cursor), the test clock seam, pgbouncer's probe, and a protocol module's definition
  only a misuse of the API reaches. Each is killed by its own ``tests/`` files
  (:mod:`properties.mutation.testtier`), named below per statement, module or definition.

``python -m properties.mutation`` runs the protocol tier; ``--tier tests`` the other.
"""

from __future__ import annotations

from typing import Final

PROTOCOL: Final = "protocol"
TESTS: Final = "tests"
TIERS: Final = (PROTOCOL, TESTS)

_PRUNE: Final = ("tests/test_prune.py",)
_SCHEMA: Final = ("tests/test_schema_migrations.py",)
_CLUSTER: Final = ("tests/test_pgcluster.py",)
_AUTH: Final = ("tests/test_pgauth.py",)
_METRICS: Final = ("tests/test_metrics.py",)
_LISTS: Final = ("tests/test_operator_pages.py", "tests/test_operator_runs_and_cancel.py")
_CLOCK: Final = ("tests/test_clock_rule.py", "tests/test_heartbeat.py")
_POOLING: Final = ("tests/test_pgbouncer.py",)
_HEARTBEAT: Final = ("tests/test_heartbeat.py", "tests/test_heartbeat_thread.py")

# The tests tier's SQL: (file, statement) -> the tests/ files that kill its mutants.
SQL_TESTS: Final[dict[tuple[str, str], tuple[str, ...]]] = {
    ("sql/prune.sql", "prune_batch"): _PRUNE,
    **{
        ("sql/schema_check.sql", name): _SCHEMA
        for name in ("schema_state", "schema_versions", "schema_version_record", "schema_lock")
    },
    **{
        ("sql/cluster.sql", name): _CLUSTER
        for name in ("cluster_data_directory", "cluster_has_database", "cluster_create_database")
    },
    ("sql/cluster.sql", "cluster_set_password"): _AUTH,
    ("sql/cluster.sql", "cluster_reload_conf"): _AUTH,
    ("sql/observe.sql", "metrics_journal"): _METRICS,
    # what `show` lists of a run's past (its claims, its retries): read for the operator's
    # eyes only, never by an action's decision (2026-12-06: '=' as '<>' passed the suite)
    ("sql/operator.sql", "operator_load_claims"): ("tests/test_claims.py",),
    ("sql/operator.sql", "operator_load_retries"): ("tests/test_retry.py",),
    # the operator's `resolve RUN` without a choice ends a backoff first (Worker.resolve)
    ("sql/operator.sql", "operator_end_backoff"): ("tests/test_operator_resolve.py",),
    ("sql/operator.sql", "operator_list_runs"): _LISTS,
    ("sql/operator.sql", "operator_list_in_doubt"): _LISTS,
    **{
        ("sql/clock.sql", name): _CLOCK
        for name in (
            "clock_now",
            "clock_skew",
            "clock_frozen_at",
            "clock_set_skew",
            "clock_advance",
            "clock_freeze",
            "clock_thaw",
        )
    },
    ("sql/pooling.sql", "serving_backend"): _POOLING,
    ("sql/pooling.sql", "pooling_probe"): _POOLING,
}
# The protocol tier's SQL: every statement of these files, and these of operator.sql
# (an operator's cancel, retry and resolution fence and move the run: protocol).
SQL_PROTOCOL_FILES: Final = frozenset({"sql/queries.sql"})
SQL_PROTOCOL: Final = frozenset(
    ("sql/operator.sql", name)
    for name in (
        "operator_cancel_run",
        "operator_retry_run",
        "operator_resolve_call",
        "operator_load_resolutions",
    )
)
# The tests tier's Python modules, by the short name mutant ids carry: the file, and the
# tests/ files that kill its mutants (the protocol's are pymutants.PATHS).
PY_TESTS: Final[dict[str, tuple[str, tuple[str, ...]]]] = {
    "prune": ("store/prune.py", _PRUNE),
    "migrate": ("store/migrate.py", _SCHEMA),
    "journalstats": ("observe/journalstats.py", _METRICS),
    "snapshot": ("operator/snapshot.py", _LISTS),
}

# Definitions of protocol modules that only a misuse of the API reaches (no schedule does):
# killed by their own tests/ files, as the tests tier's modules are.
PY_DEF_TESTS: Final[dict[tuple[str, str], tuple[str, ...]]] = {
    # the operator's `resolve RUN` without a choice (the suite's operator decides each
    # call: resolve --confirm/--redo/--fail), and the CLI's worker with its heartbeat
    ("worker", "resolve"): ("tests/test_operator_resolve.py",),
    ("worker", "open"): ("tests/test_supervisor.py", "tests/test_schema_migrations.py"),
    # a worker's own token: the suite names its workers itself (pilots.owner_of)
    ("lease", "owner_token"): ("tests/test_lease.py",),
    # the heartbeat's own thread: the suite beats every worker itself, at chosen moments
    **{("lease", name): _HEARTBEAT for name in ("start", "stop", "_loop", "make_heartbeat")},
}


def sql_tier(file: str, name: str) -> str:
    """The tier of one named statement (KeyError: a statement no tier names)."""
    in_tests = (file, name) in SQL_TESTS
    in_protocol = file in SQL_PROTOCOL_FILES or (file, name) in SQL_PROTOCOL
    if in_tests == in_protocol:
        raise KeyError(f"{file}:{name} is in {'both tiers' if in_tests else 'no tier'}")
    return TESTS if in_tests else PROTOCOL


def tier_of(module: str, where: str) -> str:
    """The tier of a mutant, by its module (``sql/x.sql`` or a short name) and where."""
    if module.startswith("sql/"):
        return sql_tier(module, where)
    return TESTS if module in PY_TESTS or (module, where) in PY_DEF_TESTS else PROTOCOL


def killers(module: str, where: str) -> tuple[str, ...]:
    """The tests/ files that kill a tests-tier mutant."""
    if module.startswith("sql/"):
        return SQL_TESTS[(module, where)]
    if (module, where) in PY_DEF_TESTS:
        return PY_DEF_TESTS[module, where]
    return PY_TESTS[module][1]
