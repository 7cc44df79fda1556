"""Named SQL queries, loaded once from `sql/*.sql` (`-- name: <query>` blocks)."""

from __future__ import annotations

import functools
import re
from importlib import resources

__all__ = ["queries"]

_NAME = re.compile(r"^-- name: (\w+)\s*$", re.MULTILINE)


@functools.cache
def queries(file: str) -> dict[str, str]:
    """`{name: sql}` for every `-- name:` block of `mock_remotes/sql/<file>`."""
    text = resources.files("mock_remotes").joinpath("sql", file).read_text(encoding="utf-8")
    parts = _NAME.split(text)
    # parts = [preamble, name1, body1, name2, body2, ...]
    return {name: body.strip() for name, body in zip(parts[1::2], parts[2::2], strict=True)}
