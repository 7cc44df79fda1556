"""The cursor of ``runs --after``: where the previous page of the runs list ended.

A page of ``runs`` is read through an index in its own order (``runs_activity``: a run's
last activity, newest first, then its id), so the next page starts *after* the last run
shown -- keyset pagination -- instead of skipping an offset: it costs the same on page one
or page ten thousand, and a run that becomes active between two pages moves to the top
instead of shifting every later page by one.

The cursor is that last run's order key, ``(activity, id)``, as one opaque token (URL-safe
base64 of a small JSON list) that a shell passes through unquoted. A token this module did
not make is refused with a :class:`~agent_runtime.errors.ConfigError` (exit 2), one line.
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass
from datetime import datetime

from ..errors import ConfigError

VERSION = 1  # the first element of every token: a later format can tell its own apart


@dataclass(frozen=True, kw_only=True)
class Cursor:
    """The order key of the last run of a page: the next page starts after it."""

    activity: datetime  # runs.updated_at, the order key (tz-aware)
    run_id: str

    def encode(self) -> str:
        data = json.dumps([VERSION, self.activity.isoformat(), self.run_id], separators=(",", ":"))
        return base64.urlsafe_b64encode(data.encode()).decode().rstrip("=")

    @classmethod
    def decode(cls, token: str) -> Cursor:
        """The cursor a token stands for; ConfigError for anything else."""
        try:
            raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
            version, at, run_id = json.loads(raw)
            activity = datetime.fromisoformat(at)
        except (binascii.Error, UnicodeDecodeError, ValueError, TypeError) as exc:
            raise ConfigError(
                f"--after {token[:40]!r} is not a cursor of `runs`: pass the value of the "
                "last page's `next` (--json) or the --after it printed"
            ) from exc
        if version != VERSION or not isinstance(run_id, str) or activity.tzinfo is None:
            raise ConfigError(
                f"--after {token[:40]!r} is not a cursor of this version of `runs`: list "
                "again from the first page"
            )
        return cls(activity=activity, run_id=run_id)

    def params(self) -> dict[str, object]:
        """The query parameters that start a page after this cursor."""
        return {"after_at": self.activity, "after_id": self.run_id}


FIRST_PAGE: dict[str, object] = {"after_at": None, "after_id": None}
