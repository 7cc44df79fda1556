"""A one-line progress display for long property runs, on a terminal only.

Off a terminal (CI logs, pytest's captured output) it stays silent: the seed and
the findings are reported by the suite itself, not by this line.
"""

from __future__ import annotations

import sys
import time
from typing import Final, TextIO

INTERVAL: Final = 0.25  # seconds between two redraws


class Progress:
    def __init__(self, label: str, stream: TextIO | None = None) -> None:
        self.label = label
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = bool(getattr(self.stream, "isatty", lambda: False)())
        self.started = time.monotonic()
        self.findings = 0
        self._drawn = 0.0

    def update(self, examples: int, events: int, crashes: int, *, force: bool = False) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if not force and now - self._drawn < INTERVAL:
            return
        self._drawn = now
        elapsed = now - self.started
        self.stream.write(
            f"\r[{self.label}] examples {examples}  events {events}  crashes {crashes}  "
            f"findings {self.findings}  {elapsed:6.1f}s "
        )
        self.stream.flush()

    def finding(self) -> None:
        self.findings += 1

    def close(self) -> None:
        if self.enabled:
            self.stream.write("\n")
            self.stream.flush()
