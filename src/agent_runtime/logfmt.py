"""The CLI's one log format: ``LEVEL event key=value ...``, one event per line.

The library only emits records (``log.info("decided run=%s ...", ...)``); installing
this formatter is the CLI's job.

Whatever a value holds (a failure reason a remote wrote, a traceback, an id from an
older database), nothing it prints can break a line or reach the terminal as a
control sequence: :func:`escape` writes every character that is not printable the way
Python writes it in a string literal (``\\n``, ``\\x1b``, ``\\u2028``). The operator's
text and its SVG go through the same function.

Nor can a value make a line unreadable by its length: every value of a record (each of its
``%s`` arguments) longer than :data:`VALUE_LIMIT` characters keeps its first
:data:`VALUE_LIMIT` and ends in a marker with its whole length, ``…[cut 5242880 chars]``
(:func:`cut`). Only the log line is cut: the journal keeps every value whole.
"""

from __future__ import annotations

import json
import logging
import sys
from typing import Any, TextIO

FORMAT = "%(levelname)s %(message)s"
VALUE_LIMIT = 2000  # characters of one logged value kept on its line; the rest is cut
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


def cut(value: str, limit: int = VALUE_LIMIT) -> str:
    """``value``, or its first ``limit`` characters and ``…[cut N chars]``, N its length."""
    if len(value) <= limit:
        return value
    return f"{value[:limit]}…[cut {len(value)} chars]"


def _short(arg: object) -> object:
    """A record's argument as its line may carry it: a number as it is (``%d`` needs one),
    anything else cut once its text is longer than :data:`VALUE_LIMIT`."""
    if arg is None or isinstance(arg, int | float):
        return arg
    text = arg if isinstance(arg, str) else str(arg)
    return arg if len(text) <= VALUE_LIMIT else cut(text)


class LineFormatter(logging.Formatter):
    """Keeps every record on one line, so each event is one line to grep; a traceback
    rides on its event's line with its newlines escaped."""

    def __init__(self) -> None:
        super().__init__(FORMAT)

    def format(self, record: logging.LogRecord) -> str:
        args = record.args
        if isinstance(args, tuple) and args:
            shortened = tuple(_short(a) for a in args)
            if any(a is not b for a, b in zip(args, shortened, strict=True)):
                record = logging.makeLogRecord({**record.__dict__, "args": shortened})
        return escape(super().format(record))


def install(level: int = logging.INFO, stream: TextIO | None = None) -> None:
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(LineFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    for noisy in ("httpx", "httpcore", "uvicorn.access"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
