"""What a run id may be, checked at every edge before anything is written.

A run id names a run in the journal, in the idempotency keys ``<run_id>:<seq>`` the
cloud keeps, in log lines, in the operator's tables and on a worker's command line
(``--spawn exec``). So a run id is:

- 1 to :data:`MAX_LENGTH` (200) characters, not only whitespace, and without
  whitespace at either end (two ids differing only there look the same everywhere);
- free of control characters: C0 (newline, tab, ESC, ...), DEL and C1, the Unicode
  line and paragraph separators, and the bidirectional overrides and isolates, which
  would break a line or reorder what a terminal shows;
- real text: no lone surrogate (what bytes that are not UTF-8 become on a command line).

Any other character is welcome: ``rün-日本-🚀`` works end to end. HTTP header values
are ASCII, so the idempotency key travels percent-encoded
(:func:`agent_runtime.clients.wire_key`); the journal keeps it as it is.

The CLI (``run --run-id``, ``RUN_ID``), :meth:`agent_runtime.Worker.run` and
``resolve``, the supervisor and the operator commands all call :func:`check_run_id`;
a refusal is :class:`~agent_runtime.errors.InvalidRunId` (exit 2).
"""

from __future__ import annotations

import unicodedata

from agent_runtime.errors import InvalidRunId
from agent_runtime.logfmt import escape

MAX_LENGTH = 200  # characters in a run id
SHOWN = 60  # characters of a refused id quoted back in the message
# Not control characters to unicodedata (category Cf), but they reorder displayed text.
BIDI_CONTROLS = frozenset(
    "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
)
FORBIDDEN_CATEGORIES = {
    "Cc": "a control character",
    "Cs": "a lone surrogate (bytes that are not UTF-8)",
    "Zl": "a line separator",
    "Zp": "a paragraph separator",
}
RULE = (
    f"a run id is 1 to {MAX_LENGTH} characters, not blank, with no whitespace at either "
    "end and no control characters"
)


def run_id_problem(run_id: object) -> str | None:
    """What is wrong with ``run_id`` as a run id, or None if nothing is."""
    if not isinstance(run_id, str):
        return f"not a string but {type(run_id).__name__}"
    if not run_id:
        return "it is empty"
    if len(run_id) > MAX_LENGTH:
        return f"it is {len(run_id)} characters long, more than {MAX_LENGTH}"
    for index, char in enumerate(run_id):
        what = FORBIDDEN_CATEGORIES.get(unicodedata.category(char))
        if what is None and char in BIDI_CONTROLS:
            what = "a bidirectional text control"
        if what is not None:
            return f"it holds {what} ({_codepoint(char)}) at position {index}"
    if not run_id.strip():
        return "it is only whitespace"
    if run_id != run_id.strip():
        return "it starts or ends with whitespace"
    return None


def check_run_id(run_id: object, *, source: str = "run id") -> str:
    """``run_id`` itself if it may name a run; else :class:`InvalidRunId` saying why.

    ``source`` names where it came from (``--run-id``, ``RUN_ID``, ``RUN``) so the message
    says what to fix. The message quotes the id with every control character escaped.
    """
    problem = run_id_problem(run_id)
    if problem is None:
        assert isinstance(run_id, str)
        return run_id
    if isinstance(run_id, str):  # quoted with its control characters escaped
        shown = f"'{escape(run_id[:SHOWN])}'" + ("..." if len(run_id) > SHOWN else "")
    else:
        shown = repr(run_id)
    raise InvalidRunId(f"{source} {shown} is refused: {problem}; {RULE}")


def _codepoint(char: str) -> str:
    return f"U+{ord(char):04X}"
