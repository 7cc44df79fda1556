"""A mutant: one file of the runtime's package, changed by one small edit."""

from __future__ import annotations

import difflib
import hashlib
from dataclasses import dataclass


@dataclass(frozen=True, kw_only=True)
class Mutant:
    id: str  # stable across unrelated edits: module, definition, operator, digest of the change
    module: str  # "acting", "journal", "sql/queries.sql"
    where: str  # the function (or class) or the named query it changes
    operator: str  # cosmic-ray's operator, or one of the SQL mutator's
    path: str  # the file, relative to the package ("acting.py", "sql/queries.sql")
    mutated: str  # the whole file, mutated
    diff: str  # a unified diff of the file

    @property
    def line(self) -> int:
        """The first changed line, for the report."""
        line = 0
        for row in self.diff.splitlines():
            if row.startswith("@@"):
                line = int(row.split()[1].split(",")[0].lstrip("-"))
            elif row.startswith(("+++", "---")):
                continue
            elif row[:1] in "+-":
                return line
            elif line:
                line += 1
        return 0


def unified_diff(before: str, after: str, path: str) -> str:
    return "\n".join(
        difflib.unified_diff(
            before.splitlines(),
            after.splitlines(),
            fromfile=f"a/{path}",
            tofile=f"b/{path}",
            lineterm="",
        )
    )


def digest(diff: str) -> str:
    """A digest of what a diff removes and adds, not where: line numbers move."""
    changed = [
        row for row in diff.splitlines() if row[:1] in "+-" and not row.startswith(("+++", "---"))
    ]
    return hashlib.sha1("\n".join(changed).encode()).hexdigest()[:8]
