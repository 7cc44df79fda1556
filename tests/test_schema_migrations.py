"""The schema migrates by version, the way real users upgrade: a database made by every
schema crashresume ever shipped (tests/schema_history/) ends up as schema.sql makes one."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from psycopg import sql
from psycopg.conninfo import make_conninfo

from agent_runtime.config import Settings
from agent_runtime.errors import EXIT_USAGE, SchemaTooNew
from agent_runtime.loop.worker import Worker
from agent_runtime.store import db, migrate
from agent_runtime.store.queries import split_named

HISTORY = Path(__file__).with_name("schema_history")
CATALOG = split_named((HISTORY / "catalog.sql").read_text("utf-8"))
MADE_BY = sorted(HISTORY.glob("v*.sql"), key=lambda p: (int(p.name[1:].split("-")[0]), p.name))
PROCESS_TIMEOUT = 60  # seconds a migrating process may take
LATEST = migrate.known().latest


@contextmanager
def scratch_database(database_url: str) -> Iterator[str]:
    """A new, empty database on the session's server; dropped afterwards."""
    name = f"cr_schema_{uuid.uuid4().hex[:8]}"
    with db.connection(database_url) as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        try:
            yield make_conninfo(database_url, dbname=name)
        finally:
            admin.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(name)))


def catalog(conn: db.Connection) -> dict[str, list[dict[str, Any]]]:
    return {name: conn.execute(text, prepare=False).fetchall() for name, text in CATALOG.items()}


def versions(conn: db.Connection) -> list[tuple[int, str]]:
    rows = conn.execute("SELECT version, how FROM schema_version ORDER BY version").fetchall()
    return [(r["version"], r["how"]) for r in rows]


@pytest.fixture(scope="module")
def fresh(database_url: str) -> dict[str, list[dict[str, Any]]]:
    """The catalog of a database schema.sql made."""
    with scratch_database(database_url) as url, db.connection(url) as conn:
        assert migrate.migrate(conn) == [LATEST]
        assert versions(conn) == [(LATEST, "created")]
        return catalog(conn)


def test_a_runs_table_of_another_schema_is_not_the_databases(database_url: str) -> None:
    """Only the ``runs`` on the search path is crashresume's: another schema's (another
    application's, with its own comment) makes no database legacy, nor names its version."""
    with scratch_database(database_url) as url, db.connection(url) as conn:
        conn.execute("CREATE SCHEMA other")
        conn.execute("CREATE TABLE other.runs (id text)")
        conn.execute("COMMENT ON TABLE other.runs IS 'crashresume schema 3'")
        assert migrate.read_state(conn) == migrate.State(kind="empty", version=0)
        conn.execute(MADE_BY[0].read_text("utf-8"), prepare=False)  # the first: no comment
        assert migrate.read_state(conn) == migrate.State(kind="legacy", version=1)


@pytest.mark.parametrize("made_by", MADE_BY, ids=[p.stem for p in MADE_BY])
def test_a_database_made_by_each_shipped_schema_migrates_to_what_schema_sql_makes(
    made_by: Path, database_url: str, fresh: dict[str, Any]
) -> None:
    version = int(made_by.name[1:].split("-")[0])
    with scratch_database(database_url) as url, db.connection(url) as conn:
        conn.execute(made_by.read_text("utf-8"), prepare=False)
        conn.execute("INSERT INTO runs (id) VALUES (%s)", [f"made-by-{made_by.stem}"])
        assert migrate.read_state(conn).version == version

        assert migrate.migrate(conn) == list(range(version + 1, LATEST + 1))

        assert catalog(conn) == fresh
        assert versions(conn) == [(version, "adopted")] + [
            (v, "migrated") for v in range(version + 1, LATEST + 1)
        ]
        kept = conn.execute("SELECT id, status, agent FROM runs").fetchall()
        assert kept == [
            {"id": f"made-by-{made_by.stem}", "status": "pending", "agent": "provisioning"}
        ]
        assert migrate.migrate(conn) == []  # current: nothing more to do
        assert db.has_schema(conn)


def test_a_database_stopped_at_each_recorded_version_migrates_step_by_step(
    database_url: str, fresh: dict[str, Any]
) -> None:
    known = migrate.known()
    for stop in range(10, LATEST + 1):  # 10: the first version schema_version records
        older = migrate.Schema(whole=known.whole, steps=known.steps[:stop])
        with scratch_database(database_url) as url, db.connection(url) as conn:
            conn.execute(MADE_BY[-1].read_text("utf-8"), prepare=False)
            migrate.migrate(conn, older)
            assert migrate.read_state(conn).version == stop
            assert migrate.migrate(conn) == list(range(stop + 1, LATEST + 1))
            assert catalog(conn) == fresh


def test_the_migrations_alone_build_what_schema_sql_builds(
    database_url: str, fresh: dict[str, Any]
) -> None:
    with scratch_database(database_url) as url, db.connection(url) as conn:
        for step in migrate.known().steps:
            conn.execute(step.text, prepare=False)
        assert catalog(conn) == fresh


def test_schema_sql_stamps_the_last_migration_and_the_root_copy_is_the_shipped_one() -> None:
    whole = migrate.known().whole
    assert f"INSERT INTO schema_version (version, how) VALUES ({LATEST}, 'created');" in whole
    assert (Path(__file__).parents[1] / "schema.sql").read_text("utf-8") == whole


def test_a_gap_in_the_migrations_numbers_is_refused_naming_the_file(tmp_path: Path) -> None:
    (tmp_path / "migrations").mkdir()
    (tmp_path / "schema.sql").write_text("")
    (tmp_path / "migrations" / "0001_first.sql").write_text("")
    (tmp_path / "migrations" / "0003_third.sql").write_text("")
    with pytest.raises(ValueError, match=r"0003_third\.sql: expected 0002_<what>\.sql"):
        migrate.load(tmp_path)


def _python(url: str, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, *args],
        env={**os.environ, "DATABASE_URL": url},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def _race(url: str, *args: str) -> list[tuple[int, str]]:
    """Two processes started together, both held at the schema lock (a lock of the
    database at ``url``) until both wait on it, then let go at once: (exit code, output)
    of each."""
    with db.connection(url) as holder, holder.transaction():
        holder.execute("SELECT pg_advisory_xact_lock(%s)", [migrate.SCHEMA_LOCK])
        procs = [_python(url, *args), _python(url, *args)]
        deadline = time.monotonic() + PROCESS_TIMEOUT
        while holder.execute(
            "SELECT count(*) AS n FROM pg_locks JOIN pg_database d ON d.oid = database "
            "WHERE locktype = 'advisory' AND NOT granted AND d.datname = current_database()"
        ).fetchone() != {"n": 2}:
            assert all(p.poll() is None for p in procs), [p.communicate() for p in procs]
            assert time.monotonic() < deadline, "the two processes never both waited"
            time.sleep(0.05)
    return [(p.wait(PROCESS_TIMEOUT), p.communicate()[0]) for p in procs]


def test_two_clis_migrating_one_older_database_at_once_apply_each_step_once(
    database_url: str, fresh: dict[str, Any]
) -> None:
    with scratch_database(database_url) as url:
        with db.connection(url) as conn:
            conn.execute((HISTORY / "v2-7b9702b.sql").read_text("utf-8"), prepare=False)

        ran = _race(url, "-m", "agent_runtime", "schema")

        assert [code for code, _ in ran] == [0, 0], ran
        out = "".join(text for _, text in ran)
        for version in range(3, LATEST + 1):
            assert len(re.findall(rf"how=migrated version={version} ", out)) == 1, out
        with db.connection(url) as conn:
            assert versions(conn) == [(2, "adopted")] + [
                (v, "migrated") for v in range(3, LATEST + 1)
            ]
            assert catalog(conn) == fresh


COUNTED_STEP = """
CREATE TABLE IF NOT EXISTS step_runs (version integer NOT NULL);
INSERT INTO step_runs VALUES ({version});
"""
MIGRATE_FROM = (
    "import sys; from pathlib import Path; from agent_runtime.store import db, migrate; "
    "conn = db.connect(sys.argv[1]); print(migrate.migrate(conn, migrate.load(Path(sys.argv[2]))))"
)


def test_two_processes_stepping_one_database_at_once_apply_each_step_once(
    database_url: str, tmp_path: Path
) -> None:
    shipped = Path(migrate.__file__).parents[1] / "sql"  # agent_runtime/sql
    folder = tmp_path / "sql"
    shutil.copytree(shipped / "migrations", folder / "migrations")
    shutil.copy(shipped / "schema.sql", folder / "schema.sql")
    for version in (LATEST + 1, LATEST + 2):  # two steps newer than the package's
        text = COUNTED_STEP.format(version=version)
        (folder / "migrations" / f"{version:04d}_counted.sql").write_text(text)
    with scratch_database(database_url) as url:
        with db.connection(url) as conn:
            migrate.migrate(conn)

        ran = _race(url, "-c", MIGRATE_FROM, url, str(folder))

        assert [code for code, _ in ran] == [0, 0], ran
        with db.connection(url) as conn:
            runs = conn.execute("SELECT version FROM step_runs ORDER BY version").fetchall()
            assert [r["version"] for r in runs] == [LATEST + 1, LATEST + 2]
            assert versions(conn)[-2:] == [(LATEST + 1, "migrated"), (LATEST + 2, "migrated")]


def _cli(url: str, *args: str, module: str = "agent_runtime") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        env={**os.environ, "DATABASE_URL": url},
        capture_output=True,
        text=True,
        timeout=PROCESS_TIMEOUT,
    )


def test_a_database_newer_than_this_crashresume_is_refused_in_one_line_and_left_alone(
    database_url: str,
) -> None:
    with scratch_database(database_url) as url:
        with db.connection(url) as conn:
            migrate.migrate(conn)
            conn.execute("INSERT INTO schema_version (version, how) VALUES (%s, 'migrated')", [99])
            with pytest.raises(
                SchemaTooNew, match=rf"schema version 99, newer .* knows: {LATEST};"
            ):
                migrate.migrate(conn)
            with pytest.raises(SchemaTooNew):
                db.require_schema(conn)  # the operator's commands refuse it too

        for module, *args in (
            ("agent_runtime", "schema"),
            ("agent_runtime", "schema", "--status"),
            ("agent_runtime", "run", "--run-id", "r"),  # a worker
            ("agent_runtime", "show", "r"),  # an operator's read
            ("agent_runtime.supervisor", "--once"),
        ):
            refused = _cli(url, *args, module=module)
            assert refused.returncode == EXIT_USAGE, (args, refused.stderr)
            lines = refused.stderr.strip().splitlines()
            assert len(lines) == 1 and "SchemaTooNew" in lines[0], (args, refused.stderr)
            assert "schema version 99, newer than this crashresume" in lines[0]
            assert f"knows: {LATEST}" in lines[0] and "Traceback" not in refused.stderr

        with db.connection(url) as conn:
            assert versions(conn) == [(LATEST, "created"), (99, "migrated")]


def test_a_worker_refused_by_a_newer_schema_leaves_no_connection_open(database_url: str) -> None:
    # Worker.open's own connection, made before the schema is read: a refusal must close
    # it (a pool worker that retries would otherwise hold one backend per try)
    with scratch_database(database_url) as url, db.connection(url) as conn:
        migrate.migrate(conn)
        conn.execute("INSERT INTO schema_version (version, how) VALUES (%s, 'migrated')", [99])
        counted = "SELECT count(*) AS n FROM pg_stat_activity WHERE datname = current_database()"
        alone = conn.execute(counted).fetchone()
        with pytest.raises(SchemaTooNew) as refused:  # keeps the worker's frame alive
            Worker.open(Settings(), url)
        assert refused.traceback  # the frame that held the connection is still reachable
        assert conn.execute(counted).fetchone() == alone


def test_schema_status_lists_what_is_applied_and_pending_and_changes_nothing(
    database_url: str,
) -> None:
    with scratch_database(database_url) as url:
        with db.connection(url) as conn:
            conn.execute((HISTORY / "v7-68b6b62.sql").read_text("utf-8"), prepare=False)

        before = _cli(url, "schema", "--status")
        assert before.returncode == 0, before.stderr
        assert f"schema version 7, latest {LATEST}" in before.stdout
        assert "applied     7  made by an older schema.sql" in before.stdout
        assert "pending     8  0008_in_flight.sql" in before.stdout
        assert f"pending    {LATEST}  {migrate.known().steps[-1].name}" in before.stdout
        with db.connection(url) as conn:
            assert migrate.read_state(conn).kind == "legacy"

        applied = _cli(url, "schema")
        assert applied.returncode == 0, applied.stderr
        done = ", ".join(str(v) for v in range(8, LATEST + 1))
        assert f"schema version 7 -> {LATEST} (applied {done})" in applied.stdout

        after = _cli(url, "schema", "--status").stdout
        assert "applied     7  adopted" in after and f"applied    {LATEST}  migrated" in after
        assert "pending" not in after
