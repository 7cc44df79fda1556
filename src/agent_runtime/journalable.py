"""What the journal can hold: JSON values ``jsonb`` takes as they are.

A model's answer and a tool's result are journaled as ``jsonb``, which refuses some values
Python's JSON accepts: U+0000 in a string, a lone UTF-16 surrogate, ``NaN`` and the
infinities (``1e400`` parses as infinity). Other values are refused here by a limit of our
own: nesting deeper than :data:`MAX_DEPTH`, an integer of :data:`MAX_DIGITS` digits or more
(Python's JSON will not write it), and, in a model's answer, a string longer than
:data:`MAX_STRING` characters. Checking at the edge turns each into one clear error before
anything is written, instead of a database error at the write.
"""

from __future__ import annotations

import math
import re
from typing import Any, Final

MAX_DEPTH: Final = 100  # levels of nesting (objects and arrays) a journaled value may have
MAX_STRING: Final = 1_000_000  # characters in one string of a model's answer
MAX_DIGITS: Final = 4000  # an integer must have fewer decimal digits than this
_HUGE: Final = 10**MAX_DIGITS
_REFUSED: Final = re.compile("[\x00\ud800-\udfff]")  # what jsonb refuses in a string
SCALARS: Final = (str, int, float, bool, type(None))


def problem(value: Any, *, max_string: int | None = None, where: str = "$") -> str | None:
    """What keeps ``value`` from being journaled as it is, naming where, or None.

    ``max_string``: the longest string allowed (None: no limit of ours). Walks the value
    without recursion, so a value nested 100,000 deep is refused, not a RecursionError.
    """
    stack: list[tuple[Any, str, int]] = [(value, where, 0)]
    while stack:
        item, path, depth = stack.pop()
        if isinstance(item, str):
            found = _string_problem(item, max_string)
            if found is not None:
                return f"{found} at {path}"
        elif isinstance(item, bool) or item is None:
            continue
        elif isinstance(item, int):
            if abs(item) >= _HUGE:
                return f"an integer of {MAX_DIGITS} digits or more at {path}"
        elif isinstance(item, float):
            if not math.isfinite(item):
                return f"a number JSON cannot carry into the journal ({item!r}) at {path}"
        elif isinstance(item, dict | list | tuple):
            if depth >= MAX_DEPTH:
                return f"nesting deeper than {MAX_DEPTH} levels at {path}"
            if isinstance(item, dict):
                for key, inner in item.items():
                    if not isinstance(key, SCALARS) or isinstance(key, float):
                        return f"a key of type {type(key).__name__} at {path}"
                    if isinstance(key, str) and (bad := _string_problem(key, max_string)):
                        return f"{bad} in a key at {path}"
                    stack.append((inner, f"{path}.{key}", depth + 1))
            else:
                stack.extend((inner, f"{path}[{i}]", depth + 1) for i, inner in enumerate(item))
        else:
            return f"a {type(item).__name__}, which is not JSON, at {path}"
    return None


def _string_problem(text: str, max_string: int | None) -> str | None:
    if max_string is not None and len(text) > max_string:
        return f"a string of {len(text)} characters (the limit is {max_string})"
    found = _REFUSED.search(text)
    if found is None:
        return None
    char = found.group()
    return "U+0000" if char == "\x00" else f"a lone surrogate U+{ord(char):04X}"
