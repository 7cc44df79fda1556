"""A one-line progress counter for long conform runs: on a terminal only, silent elsewhere."""

from __future__ import annotations

import sys
import time
from typing import TextIO

INTERVAL = 0.1  # seconds between two redraws


class Progress:
    def __init__(self, label: str, stream: TextIO | None = None) -> None:
        self._stream = stream if stream is not None else sys.stderr
        self._live = bool(getattr(self._stream, "isatty", lambda: False)())
        self._label = label
        self._last = 0.0
        self._drawn = False

    def update(self, scenarios: int, findings: int, *, force: bool = False) -> None:
        if not self._live:
            return
        now = time.monotonic()
        if not force and now - self._last < INTERVAL:
            return
        self._last = now
        self._stream.write(
            f"\r{self._label}: {scenarios} scenarios, {findings} finding(s) so far\x1b[K"
        )
        self._stream.flush()
        self._drawn = True

    def close(self) -> None:
        if self._drawn:
            self._stream.write("\r\x1b[K")
            self._stream.flush()
