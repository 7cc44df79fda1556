"""A database made by an older version gets the new schema on first use, data kept."""

from __future__ import annotations

from typing import Any

from agent_runtime import db
from agent_runtime.journal import Journal


def test_an_older_schema_is_upgraded_in_place_and_keeps_its_runs(conn: Any) -> None:
    Journal(conn).create_run("from-before")
    conn.execute("ALTER TABLE cr_clock DROP COLUMN frozen_at CASCADE")
    conn.execute("COMMENT ON TABLE runs IS NULL")
    assert not db.has_schema(conn)
    db.ensure_schema(conn)
    assert db.has_schema(conn)
    assert conn.execute("SELECT frozen_at FROM cr_clock").fetchone() == {"frozen_at": None}
    assert Journal(conn).require_run("from-before").status == "pending"


def test_the_schema_says_the_version_the_code_expects() -> None:
    assert f"COMMENT ON TABLE runs IS '{db.SCHEMA_VERSION}';" in db.schema_text()
