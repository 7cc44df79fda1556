"""The CLI's one log format: ``LEVEL event key=value ...``, one event per line.

The library only emits records (``log.info("decided run=%s ...", ...)``); installing
this formatter is the CLI's job.
"""

from __future__ import annotations

import logging
import sys
from typing import TextIO

FORMAT = "%(levelname)s %(message)s"


class LineFormatter(logging.Formatter):
    """Keeps every record on one line, so each event is one line to grep."""

    def __init__(self) -> None:
        super().__init__(FORMAT)

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        return text.replace("\n", "\\n")


def install(level: int = logging.INFO, stream: TextIO | None = None) -> None:
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(LineFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    for noisy in ("httpx", "httpcore", "uvicorn.access"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
