"""Named SQL queries, loaded once from the ``sql/*.sql`` files.

A query starts at a ``-- name: <name>`` line and runs to the next one; comment
lines inside it are dropped. Nothing here builds SQL from strings: callers pass
parameters, never identifiers.

The runtime's own queries are :func:`query`; any other folder of ``.sql`` files in
the same format (the property suite's) loads with :func:`load_queries`::

    QUERIES = load_queries(Path(__file__).with_name("sql"))
    conn.execute(QUERIES["stale_writes"], {"run": run_id})
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterator, Mapping
from functools import cache
from importlib import resources
from importlib.resources.abc import Traversable

from psycopg import sql

_NAME = re.compile(r"^-- name: (\w+)\s*$", re.MULTILINE)
SCHEMA_FILE = "schema.sql"  # the runtime's schema: one script, not named queries


class NamedQueries(Mapping[str, sql.SQL]):
    """The named queries of one folder, by name; an unknown name says where it looked."""

    def __init__(self, texts: Mapping[str, str], where: str) -> None:
        self._texts = dict(texts)
        self.where = where  # the files they came from, for messages

    def __getitem__(self, name: str) -> sql.SQL:
        return sql.SQL(self.text(name))

    def __iter__(self) -> Iterator[str]:
        return iter(self._texts)

    def __len__(self) -> int:
        return len(self._texts)

    def text(self, name: str) -> str:
        """The statement as written (comment lines dropped)."""
        try:
            return self._texts[name]
        except KeyError:
            raise KeyError(f"no query named {name!r} in {self.where}") from None


def split_named(text: str) -> dict[str, str]:
    """``{name: statement}`` of one file's ``-- name:`` blocks (trailing ``;`` dropped)."""
    parts = _NAME.split(text)
    queries: dict[str, str] = {}
    for name, body in zip(parts[1::2], parts[2::2], strict=True):
        if name in queries:
            raise ValueError(f"query {name!r} is defined twice in one file")
        lines = [ln for ln in body.strip().splitlines() if not ln.lstrip().startswith("--")]
        queries[name] = "\n".join(lines).strip().rstrip(";")
    return queries


def load_queries(folder: Traversable, *, skip: Collection[str] = ()) -> NamedQueries:
    """Every named query of every ``*.sql`` file in ``folder`` but those named in ``skip``.

    ``folder`` is a directory (a :class:`pathlib.Path`) or a package's resource folder
    (``importlib.resources.files("pkg") / "sql"``). Names must be unique across the files:
    a second definition raises ``ValueError`` naming both files.
    """
    queries: dict[str, str] = {}
    origin: dict[str, str] = {}
    entries = sorted(folder.iterdir(), key=lambda e: e.name)
    for entry in entries:
        if not entry.name.endswith(".sql") or entry.name in skip:
            continue
        for name, text in split_named(entry.read_text("utf-8")).items():
            if name in queries:
                raise ValueError(
                    f"query {name!r} is defined twice ({origin[name]} and {entry.name})"
                )
            queries[name] = text
            origin[name] = entry.name
    return NamedQueries(queries, where=f"{folder}/*.sql")


@cache
def runtime_queries() -> NamedQueries:
    """The runtime's queries: every ``agent_runtime/sql/*.sql`` file but the schema."""
    folder = resources.files("agent_runtime").joinpath("sql")
    return load_queries(folder, skip=(SCHEMA_FILE,))


def query(name: str) -> sql.SQL:
    return runtime_queries()[name]
