"""What a broken invariant raises: a :class:`Violation` names its kind, run, step and story."""

from __future__ import annotations


class Violation(AssertionError):
    """An invariant does not hold. ``kind`` says which (see ARCHITECTURE.md's list)."""

    def __init__(self, kind: str, run: str | None, seq: int | None, message: str) -> None:
        where = "" if run is None else f"run {run}" + ("" if seq is None else f" step {seq}")
        super().__init__(f"[{kind}] {where + ': ' if where else ''}{message}")
        self.kind = kind
        self.run = run
        self.seq = seq
        self.message = message


class Violations(AssertionError):
    """Several at once; the first one leads the message."""

    def __init__(self, found: list[Violation]) -> None:
        lines = [str(v) for v in found]
        more = f"\n  (+{len(found) - 1} more)\n  " + "\n  ".join(lines[1:]) if found[1:] else ""
        super().__init__(lines[0] + more)
        self.found = found


def raise_if(found: list[Violation]) -> None:
    if len(found) == 1:
        raise found[0]
    if found:
        raise Violations(found)


def text_of_kind(problems: list[Violation], kind: str) -> str:
    """All of ``problems`` as text, once one of them is of ``kind`` (a planted slip's test:
    its check must have caught it); AssertionError naming what was found instead."""
    text = "\n".join(str(p) for p in problems)
    assert any(p.kind == kind for p in problems), f"no {kind}; found: {text or 'nothing'}"
    return text
