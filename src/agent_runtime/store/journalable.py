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
    without recursion, so a value nested 100,000 deep is refused, not a RecursionError;
    where a value sits is spelled out only for the one refused.
    """
    if not _suspect(value, max_string):
        return None
    stack: list[tuple[Any, Trail, int]] = [(value, (None, where), 0)]
    while stack:
        item, trail, depth = stack.pop()
        found = _item_problem(item, depth, max_string)
        if found is not None:
            return f"{found} at {_spelled(trail)}"
        if isinstance(item, dict):
            stack.extend((inner, (trail, f".{key}"), depth + 1) for key, inner in item.items())
        elif isinstance(item, list | tuple):
            stack.extend((inner, (trail, f"[{i}]"), depth + 1) for i, inner in enumerate(item))
    return None


def _suspect(value: Any, max_string: int | None) -> bool:
    """Whether :func:`problem` must look closer: the lean walk every journaled value takes
    (about twice ``json.dumps``), with exact types, no paths, no calls per item."""
    longest = max_string if max_string is not None else math.inf
    stack: list[tuple[Any, int]] = [(value, 0)]
    pop, push = stack.pop, stack.append
    while stack:
        item, depth = pop()
        kind = type(item)
        if kind is str:
            if len(item) > longest or _REFUSED.search(item):
                return True
        elif kind is dict:
            if depth >= MAX_DEPTH:
                return True
            for key, inner in item.items():
                if type(key) is not str or len(key) > longest or _REFUSED.search(key):
                    return True
                push((inner, depth + 1))
        elif kind is list:
            if depth >= MAX_DEPTH:
                return True
            for inner in item:
                push((inner, depth + 1))
        elif kind is float:
            if not math.isfinite(item):
                return True
        elif kind is int:
            if abs(item) >= _HUGE:
                return True
        elif kind is not bool and item is not None:
            return True  # a tuple, a subclass, something that is not JSON: look closer
    return False


Trail = tuple[Any, str]  # (the parent's trail or None, this step of the path)


def _spelled(trail: Trail) -> str:
    steps: list[str] = []
    node: Trail | None = trail
    while node is not None:
        node, step = node
        steps.append(step)
    return "".join(reversed(steps))


def _item_problem(item: Any, depth: int, max_string: int | None) -> str | None:
    """What is wrong with ``item`` itself (not what it holds), or None."""
    if isinstance(item, str):
        return _string_problem(item, max_string)
    if isinstance(item, bool) or item is None:
        return None
    if isinstance(item, int):
        return f"an integer of {MAX_DIGITS} digits or more" if abs(item) >= _HUGE else None
    if isinstance(item, float):
        ok = math.isfinite(item)
        return None if ok else f"a number JSON cannot carry into the journal ({item!r})"
    if isinstance(item, dict | list | tuple):
        if depth >= MAX_DEPTH:
            return f"nesting deeper than {MAX_DEPTH} levels"
        if isinstance(item, dict):
            for key in item:
                if not isinstance(key, SCALARS) or isinstance(key, float):
                    return f"a key of type {type(key).__name__}"
                if isinstance(key, str) and (bad := _string_problem(key, max_string)):
                    return f"{bad} in a key"
        return None
    return f"a {type(item).__name__}, which is not JSON,"


def _string_problem(text: str, max_string: int | None) -> str | None:
    if max_string is not None and len(text) > max_string:
        return f"a string of {len(text)} characters (the limit is {max_string})"
    found = _REFUSED.search(text)
    if found is None:
        return None
    char = found.group()
    return "U+0000" if char == "\x00" else f"a lone surrogate U+{ord(char):04X}"
