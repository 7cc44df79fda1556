"""The mutation machinery: the SQL mutator, the annotations, and the killing command."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
from cosmic_ray import work_item
from cosmic_ray.testing import run_tests

from .mutation import __main__ as mutation_main
from .mutation import pymutants, report, sqlmutants, tiers
from .mutation.mutants import Mutant
from .mutation.overlay import Overlay
from .server import DATADIR_ENV, SuiteDatabase

CHECK = "-m properties.mutation.check"
SAMPLE = """\
-- name: sample
-- a comment with a <= b AND c
WITH owned AS (
    SELECT id FROM runs
    WHERE id = %(run)s AND owner = %(owner)s
    FOR UPDATE SKIP LOCKED
)
UPDATE runs r SET x = 1
FROM owned LEFT JOIN t ON t.id = owned.id
WHERE r.lease <= cr_now() AND r.y IS NULL
RETURNING r.id;
"""


def changed(diff: str) -> tuple[str, ...]:
    return tuple(
        row for row in diff.splitlines() if row[:1] in "+-" and not row.startswith(("---", "+++"))
    )


def test_the_sql_mutator_makes_exactly_the_expected_mutants_of_a_sample() -> None:
    made = {(m.operator, changed(m.diff)) for m in sqlmutants.mutants_of_file(SAMPLE, "x.sql")}
    fence = "    WHERE id = %(run)s AND owner = %(owner)s"
    lease = "WHERE r.lease <= cr_now() AND r.y IS NULL"
    join = "FROM owned LEFT JOIN t ON t.id = owned.id"
    relaxed = "set_config('synchronous_commit', 'off', true) = 'off' AND "
    assert made == {
        ("drop_conjunct", ("-" + fence, "+    WHERE id = %(run)s")),
        ("drop_conjunct", ("-" + fence, "+    WHERE owner = %(owner)s")),
        ("drop_conjunct", ("-" + lease, "+WHERE r.lease <= cr_now()")),
        ("drop_conjunct", ("-" + lease, "+WHERE r.y IS NULL")),
        ("flip_comparison", ("-" + fence, "+    WHERE id <> %(run)s AND owner = %(owner)s")),
        ("flip_comparison", ("-" + fence, "+    WHERE id = %(run)s AND owner <> %(owner)s")),
        ("flip_comparison", ("-" + join, "+FROM owned LEFT JOIN t ON t.id <> owned.id")),
        ("flip_comparison", ("-" + lease, "+WHERE r.lease > cr_now() AND r.y IS NULL")),
        ("flip_comparison", ("-" + lease, "+WHERE r.lease <= cr_now() AND r.y IS NOT NULL")),
        ("left_join", ("-" + join, "+FROM owned JOIN t ON t.id = owned.id")),
        ("drop_lock", ("-    FOR UPDATE SKIP LOCKED",)),
        ("drop_lock", ("-    FOR UPDATE SKIP LOCKED", "+    FOR UPDATE")),
        ("relax_commit", ("-" + fence, "+    WHERE " + relaxed + fence.removeprefix("    WHERE "))),
    }  # the comment's "<=" and "AND", and the SET's "=", are left alone


def test_a_relaxed_setting_is_mutated_to_off_and_to_the_session() -> None:
    text = (
        "-- name: w\nWITH relaxed AS (SELECT set_config('synchronous_commit', %(commit)s, true))\n"
        "UPDATE t SET a = 1 WHERE id = %(run)s;\n"
    )
    made = {
        changed(m.diff)[1]
        for m in sqlmutants.mutants_of_file(text, "x.sql")
        if m.operator == "relax_commit"
    }
    assert made == {
        "+WITH relaxed AS (SELECT set_config('synchronous_commit', 'off', true))",
        "+WITH relaxed AS (SELECT set_config('synchronous_commit', %(commit)s, false))",
    }


def test_the_fenced_writes_of_the_runtime_are_the_statements_under_owner_and_generation() -> None:
    text = (Path(pymutants.__file__).parents[2] / "src/agent_runtime/sql/queries.sql").read_text()
    fenced = sqlmutants.fenced_writes(text)
    assert {"record_decision", "record_intent", "record_confirm", "finish_run"} <= set(fenced)
    assert "claim_expired" not in fenced and "load_history" not in fenced


def test_python_mutants_leave_annotations_alone_and_are_stable() -> None:
    overlay = Overlay()
    try:
        found = pymutants.enumerate_module(overlay.package, "claiming")
        assert found.excluded.get("annotation", 0) > 0
        first = pymutants.mutant(overlay.package, "claiming", found.mutants[0])
        again = pymutants.mutant(overlay.package, "claiming", found.mutants[0])
        assert first is not None and again is not None and first.id == again.id
        assert first.mutated != (overlay.package / "loop" / "claiming.py").read_text()
    finally:
        overlay.close()


def test_the_same_change_of_two_equal_lines_makes_two_ids() -> None:
    """``owner_is_dead`` returns False four times: each ``return True`` mutant is its own
    (they shared one id, so a results file kept one verdict for four: 2026-12-06)."""
    overlay = Overlay()
    try:
        found = pymutants.enumerate_module(overlay.package, "lease")
        made = [pymutants.mutant(overlay.package, "lease", p) for p in found.mutants]
        ids = [m.id for m in made if m is not None]
        assert len(ids) == len(set(ids))
        flipped = sorted(i for i in ids if i.startswith("lease:owner_is_dead:ReplaceFalseWithTrue"))
        assert [i.rsplit(":", 1)[1][8:] for i in flipped] == ["", "-2", "-3", "-4"]
    finally:
        overlay.close()


def test_an_equivalent_mutant_annotation_round_trips(tmp_path: Path) -> None:
    def survivor(ident: str) -> report.Result:
        return report.Result(
            id=ident, module="acting", where="f", operator="AddNot", line=3,
            status="survived", seconds=1.0, detail="survived", diff="-a\n+b",
        )  # fmt: skip

    annotations = tmp_path / "equivalent.toml"
    annotations.write_text(report.annotation('acting:f:AddNot:"x"', "a why\nwith a newline"))
    results = {r.id: r for r in (survivor('acting:f:AddNot:"x"'), survivor("acting:f:y"))}
    out = tmp_path / "report.md"
    report.write(results, report.load_annotations(annotations), out, context={})
    data = json.loads(out.with_suffix(".json").read_text())
    verdicts = {s["id"]: s["verdict"] for s in data["survivors"]}
    assert verdicts == {
        'acting:f:AddNot:"x"': "equivalent: a why\nwith a newline",
        "acting:f:y": "open",
    }
    assert data["modules"]["acting"]["equivalent"] == 1
    assert "**open**" in out.read_text()


def test_a_mutant_argued_equivalent_twice_is_refused(tmp_path: Path) -> None:
    annotations = tmp_path / "equivalent.toml"
    twice = report.annotation("acting:f:AddNot:x", "one why") + "\n"
    annotations.write_text(twice + report.annotation("acting:f:AddNot:x", "another why"))
    with pytest.raises(ValueError, match="acting:f:AddNot:x is argued equivalent twice"):
        report.load_annotations(annotations)


def test_every_module_of_the_supervisor_package_is_mutated_with_the_pool_stage() -> None:
    """The Supervisor class (supervision, takeback, unserved) runs only in the pool stage:
    each module of the package is a protocol module, and each of them gets the pool stage
    alone (``--pool-only``: the in-process stages never import the package)."""
    package = Path(pymutants.__file__).parents[2] / "src/agent_runtime/supervisor"
    files = {f"supervisor/{p.name}" for p in package.glob("*.py")} - {
        "supervisor/__init__.py",
        "supervisor/__main__.py",
    }
    by_path = {path: name for name, path in pymutants.PATHS.items()}
    assert files <= set(by_path), files - set(by_path)
    assert {by_path[f] for f in files} == mutation_main.POOL_MODULES
    assert set(mutation_main.POOL_MODULES) <= set(pymutants.PROTOCOL)
    for module in mutation_main.POOL_MODULES:
        blank = dict.fromkeys(("id", "where", "operator", "path", "mutated", "diff"), "")
        mutant = Mutant(module=module, **blank)
        assert mutation_main._command(mutant, "suite") == "suite --pool-only"


def test_the_checked_in_annotations_load() -> None:
    assert all(why.strip() for why in report.load_annotations().values())


def test_a_sweep_that_ignores_leases_is_killed_by_the_command(
    suite_database: SuiteDatabase, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The mutator's own make of the claim_ignores_lease variant: the sweep's lease
    predicate dropped. (Dropping the owner alone from a fenced write is not killed: the
    generation fences by itself; see ARCHITECTURE.md, mutation testing.)"""
    overlay = Overlay()
    try:
        text = (overlay.package / "sql" / "queries.sql").read_text()
        careless = [
            m
            for m in sqlmutants.mutants_of_file(text, "sql/queries.sql", names=["claim_expired"])
            if m.operator == "drop_conjunct"
            and changed(m.diff)
            == ("-      AND (lease_expires_at IS NULL OR lease_expires_at <= cr_now())",)
        ]
        assert len(careless) == 1
        monkeypatch.setenv("PYTHONPATH", overlay.environ()["PYTHONPATH"])
        monkeypatch.setenv(DATADIR_ENV, str(suite_database.cluster.datadir))
        with overlay.applied(careless[0]):
            outcome, output = run_tests(f"{sys.executable} {CHECK} --no-hypothesis", 300)
        assert f"agent_runtime={overlay.package}" in output
        assert outcome == work_item.TestOutcome.KILLED, output
        assert "killed: " in output and "schedule: " in output
    finally:
        overlay.close()


@pytest.mark.parametrize(
    "line",
    [
        "+            if args.prune_after is not None",  # parses a --prune-after nobody gave
        "+        addresses = args.agent and [DEFAULT_AGENT]",  # serves the default, not --agent
    ],
)
def test_a_supervisor_command_that_misreads_its_options_is_killed_by_the_pool_stage(
    suite_database: SuiteDatabase, monkeypatch: pytest.MonkeyPatch, line: str
) -> None:
    """No schedule runs the supervisor's command (they build the Supervisor directly); the
    pool stage's last step starts it, from the copy (run alone here: ``--command-only``):
    ``args.prune_after is not None`` parses a --prune-after nobody gave, and the command
    fails before its first pass; ``args.agent and [...]`` serves the default agent
    whatever ``--agent`` said."""
    overlay = Overlay()
    try:
        found = pymutants.enumerate_module(overlay.package, "supervisor")
        made = [pymutants.mutant(overlay.package, "supervisor", p) for p in found.mutants]
        misread = [
            m
            for m in made
            if m is not None and m.where == "main" and changed(m.diff)[-1:] == (line,)
        ]
        assert len(misread) == 1
        monkeypatch.setenv("PYTHONPATH", overlay.environ()["PYTHONPATH"])
        monkeypatch.setenv(DATADIR_ENV, str(suite_database.cluster.datadir))
        with overlay.applied(misread[0]):
            outcome, output = run_tests(f"{sys.executable} {CHECK} --command-only", 300)
        assert f"agent_runtime={overlay.package}" in output
        assert outcome == work_item.TestOutcome.KILLED, output
        assert "after: pool: the supervisor's command, --once" in output, output
    finally:
        overlay.close()


def test_every_sql_statement_and_mutated_module_is_in_exactly_one_tier() -> None:
    """The protocol's statements are killed by the suite; the rest (retention, the schema
    check, cluster, metrics, the operator's lists, the clock seam, pgbouncer's probe) by
    their own tests/ files, which exist."""
    root = Path(pymutants.__file__).parents[2]
    package = root / "src/agent_runtime"
    seen: dict[str, int] = {}
    for path in sorted((package / "sql").glob("*.sql")):
        if path.name in sqlmutants.SKIP_FILES:
            continue
        file = f"sql/{path.name}"
        for query in sqlmutants.queries(path.read_text("utf-8"), file):
            tier = tiers.sql_tier(file, query.name)  # KeyError: in no tier, or in both
            seen[tier] = seen.get(tier, 0) + 1
            if tier == tiers.TESTS:
                assert all((root / f).is_file() for f in tiers.killers(file, query.name))
    assert seen[tiers.PROTOCOL] >= 30 and seen[tiers.TESTS] > 15, seen
    named = {key for key in tiers.SQL_TESTS} | set(tiers.SQL_PROTOCOL)
    statements = {
        (f"sql/{p.name}", q.name)
        for p in (package / "sql").glob("*.sql")
        for q in sqlmutants.queries(p.read_text("utf-8"), f"sql/{p.name}")
    }
    assert named <= statements, named - statements  # no stale names
    assert not set(pymutants.PATHS) & set(tiers.PY_TESTS)
    for module, (source, killers) in tiers.PY_TESTS.items():
        assert (package / source).is_file() and tiers.tier_of(module, "") == tiers.TESTS
        assert all((root / f).is_file() for f in killers)
    assert all(tiers.tier_of(m, "") == tiers.PROTOCOL for m in pymutants.PROTOCOL)
    for (module, where), killers in tiers.PY_DEF_TESTS.items():  # a definition moved over
        assert module in pymutants.PROTOCOL and tiers.tier_of(module, where) == tiers.TESTS
        assert all((root / f).is_file() for f in killers)
    with pytest.raises(KeyError, match="no tier"):
        tiers.sql_tier("sql/queries.sql.new", "anything")
    nightly = (root / ".github/workflows/nightly.yml").read_text("utf-8")
    assert 'args: "--tier tests"' in nightly  # the nightly's mutation job runs both tiers


def test_the_driver_selects_by_tier_and_runs_each_mutant_with_its_tiers_command() -> None:
    overlay = Overlay()
    try:
        args = mutation_main.build_parser().parse_args(["--sql", "--tier", "tests"])
        chosen, _ = mutation_main.select(args, overlay.package)
        assert chosen and {tiers.tier_of(m.module, m.where) for m in chosen} == {tiers.TESTS}
        prune = next(m for m in chosen if m.where == "prune_batch")
        assert mutation_main._command(prune, "suite").endswith(
            "-m properties.mutation.testtier tests/test_prune.py"
        )
        args = mutation_main.build_parser().parse_args(["--sql"])
        protocol, _ = mutation_main.select(args, overlay.package)
        assert not {m.id for m in protocol} & {m.id for m in chosen}
        assert any(m.where == "operator_cancel_run" for m in protocol)
        assert mutation_main._command(protocol[0], "suite") == "suite"
        held = next(m for m in protocol if m.where == "held_runs")
        assert mutation_main._command(held, "suite") == "suite --pool-only"
    finally:
        overlay.close()


def test_the_report_shows_the_two_tiers_apart(tmp_path: Path) -> None:
    def result(ident: str, module: str, where: str, status: str) -> report.Result:
        return report.Result(
            id=ident, module=module, where=where, operator="flip_comparison", line=1,
            status=status, seconds=1.0, detail="", diff="-a\n+b",
        )  # fmt: skip

    results = [
        result("a", "sql/operator.sql", "operator_cancel_run", "killed"),
        result("b", "sql/operator.sql", "operator_list_runs", "survived"),
        result("c", "sql/prune.sql", "prune_batch", "killed"),
    ]
    out = tmp_path / "report.md"
    data = report.write({r.id: r for r in results}, {}, out, context={})
    assert data["tiers"]["protocol"]["sql/operator.sql"]["total"] == 1
    assert data["tiers"]["tests"]["sql/operator.sql"]["survived"] == 1
    assert data["tiers"]["tests"]["sql/prune.sql"]["killed"] == 1
    text = out.read_text()
    protocol, tests = text.split("### Tier: protocol")[1].split("### Tier: tests")
    assert "sql/prune.sql" not in protocol and "sql/prune.sql" in tests


def test_the_statements_only_the_supervisor_sends_get_the_pool_stage() -> None:
    """A statement the supervisor package sends, and neither the rest of the runtime nor the
    suite's own sweep, runs only under the real supervisor (and in the statement corners,
    which ``--pool-only`` runs first): its mutants get ``--pool-only``, as the package's
    do. One the suite's sweep mimics (``claim_expired``) gets both
    stages: only the real supervisor serves a subset of the agents."""
    source = Path(pymutants.__file__).parents[2] / "src/agent_runtime"
    suite = Path(__file__).parent
    named = re.compile(r'\(\s*[\w.]+,\s*"([a-z_]+)"')  # a call: a connection, then a name
    sql = source / "sql/queries.sql"
    queries = {q.name for q in sqlmutants.queries(sql.read_text(), "sql/queries.sql")}

    def sent(paths: list[Path]) -> set[str]:
        return {n for p in paths for n in named.findall(p.read_text()) if n in queries}

    inside = sorted((source / "supervisor").glob("*.py"))
    outside = [p for p in source.rglob("*.py") if "supervisor" not in p.parts]
    # the statement corners send the supervisor's statements as the supervisor would, and
    # --pool-only runs them before the pool stage (check.py): no mimic of the sweep
    corners = ("pool_", "test_", "sql_corners")
    mimic = [p for p in suite.rglob("*.py") if not p.name.startswith(corners)]
    mimicked = sent([p for p in mimic if "mutation" not in p.parts])
    assert sent(inside) - sent(outside) - mimicked == mutation_main.POOL_QUERIES
    assert sent(inside) & mimicked == mutation_main.MIMICKED_QUERIES
