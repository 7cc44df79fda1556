"""The CLI's one log format: ``LEVEL event key=value ...``, one event per line.

The library only emits records (``log.info("decided run=%s ...", ...)``); installing
this formatter is the CLI's job.

Whatever a value holds (a failure reason a remote wrote, a traceback, an id from an
older database), nothing it prints can break a line or reach the terminal as a
control sequence: :func:`escape` writes every character that is not printable the way
Python writes it in a string literal (``\\n``, ``\\x1b``, ``\\u2028``). The operator's
text and its SVG go through the same function.
"""

from __future__ import annotations

import json
import logging
import sys
from typing import Any, TextIO

FORMAT = "%(levelname)s %(message)s"
_SHORT = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def brief(value: Any, width: int = 80) -> str:
    """A result as a log line shows it: its ``id`` when it has one, else its compact JSON,
    cut to ``width`` characters (the last three ``...``)."""
    if isinstance(value, dict) and isinstance(value.get("id"), str):
        return str(value["id"])
    text = json.dumps(value, sort_keys=True, separators=(",", ":"))
    return text if len(text) <= width else text[: width - 3] + "..."


def escape(text: str) -> str:
    """``text`` with every non-printable character (C0, DEL, C1, separators, format
    and bidirectional controls, lone surrogates) written as a backslash escape."""
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() else _escaped(ch) for ch in text)


def _escaped(ch: str) -> str:
    short = _SHORT.get(ch)
    if short is not None:
        return short
    code = ord(ch)
    if code < 0x100:
        return f"\\x{code:02x}"
    if code < 0x10000:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


class LineFormatter(logging.Formatter):
    """Keeps every record on one line, so each event is one line to grep; a traceback
    rides on its event's line with its newlines escaped."""

    def __init__(self) -> None:
        super().__init__(FORMAT)

    def format(self, record: logging.LogRecord) -> str:
        return escape(super().format(record))


def install(level: int = logging.INFO, stream: TextIO | None = None) -> None:
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(LineFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    for noisy in ("httpx", "httpcore", "uvicorn.access"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
