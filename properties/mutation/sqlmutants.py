"""A small SQL mutator for the runtime's named queries (``src/agent_runtime/sql/*.sql``).

No mutation tool reads SQL, and the protocol lives as much in its statements as in its
Python: the fence is a conjunct, the claim a comparison, the durability a setting. So
this module makes the mutants a developer's slip would make, one edit of one statement
each, on the file's own text (so a mutant is a real diff of ``queries.sql``):

=================  ==========================================================================
operator           what it does
=================  ==========================================================================
drop_conjunct      removes one operand of an ``AND`` chain (``AND owner = %(owner)s``; or the
                   first one, ``id = %(run)s AND``)
flip_comparison    ``<=`` -> ``>``, ``<`` -> ``>=`` (and back), ``=`` -> ``<>`` in a condition,
                   ``<>`` -> ``=``, ``IS NULL`` <-> ``IS NOT NULL``
left_join          ``LEFT JOIN`` -> ``JOIN``
drop_lock          drops a ``FOR UPDATE`` / ``FOR SHARE`` clause, or only its ``SKIP LOCKED``
relax_commit       a write's durable commit made asynchronous: ``set_config('synchronous_commit',
                   x, true)`` -> ``'off'`` or session-wide (``false``); a write with no setting
                   gains ``set_config('synchronous_commit', 'off', true) = 'off'`` in its first
                   ``WHERE``
=================  ==========================================================================

Comments (``--`` to the end of a line) are never mutated. A mutant is applied by writing
its file into the copy of the package a mutant runs against (:mod:`.overlay`): the runtime
loads its SQL from there once, in the process that runs the schedules and in every child
it forks or starts.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from .mutants import Mutant, digest, unified_diff

OPERATORS: Final = ("drop_conjunct", "flip_comparison", "left_join", "drop_lock", "relax_commit")
SKIP_FILES: Final = ("schema.sql",)  # a script of DDL, not named queries

_NAME: Final = re.compile(r"^-- name: (\w+)\s*$", re.MULTILINE)
_TOKEN: Final = re.compile(r"%\(\w+\)s|'(?:[^']|'')*'|\w+|::|<=|>=|<>|!=|=>|:=|\|\||\S", re.ASCII)
_FLIPS: Final = {"<=": ">", ">": "<=", "<": ">=", ">=": "<", "<>": "=", "!=": "=", "=": "<>"}
# Words that end an operand of an AND chain (at its own depth of parentheses).
_STOP: Final = frozenset(
    [
        "AND",
        "OR",
        "RETURNING",
        "ORDER",
        "GROUP",
        "LIMIT",
        "FOR",
        "ON",
        "SELECT",
        "FROM",
        "WHERE",
        "SET",
        "UNION",
        "INSERT",
        "UPDATE",
        "DELETE",
        "THEN",
        "ELSE",
        "END",
        "WHEN",
        "WITH",
    ]
)
# The nearest of these before an ``=`` says whether it compares or assigns.
_CONTEXT: Final = frozenset(
    ["SET", "WHERE", "ON", "AND", "OR", "WHEN", "HAVING", "SELECT", "RETURNING", "VALUES"]
)
_CONDITION: Final = frozenset(["WHERE", "ON", "AND", "OR", "WHEN", "HAVING"])
_WRITES: Final = frozenset({"INSERT", "UPDATE", "DELETE"})
_LOCK: Final = frozenset(["UPDATE", "SHARE", "NO", "KEY", "OF", "SKIP", "LOCKED", "NOWAIT"])
_RELAX: Final = "set_config('synchronous_commit', 'off', true) = 'off' AND "
_SETTING: Final = re.compile(
    r"set_config\('synchronous_commit',\s*(?P<value>[^,]+?),\s*(?P<local>true|false)\)"
)


@dataclass(frozen=True)
class Token:
    text: str
    start: int  # offset in the file
    end: int

    @property
    def word(self) -> str:
        return self.text.upper()


@dataclass(frozen=True, kw_only=True)
class Query:
    name: str
    file: str  # e.g. "sql/queries.sql", relative to the package
    start: int  # offsets of the block (its "-- name:" line excluded) in the file
    end: int


def queries(text: str, file: str) -> list[Query]:
    """The ``-- name:`` blocks of one file's text."""
    found = list(_NAME.finditer(text))
    return [
        Query(
            name=m.group(1),
            file=file,
            start=m.end(),
            end=found[i + 1].start() if i + 1 < len(found) else len(text),
        )
        for i, m in enumerate(found)
    ]


def tokens(text: str, start: int, end: int) -> list[Token]:
    """The tokens of ``text[start:end]`` outside comments, with their file offsets."""
    out: list[Token] = []
    for line in re.finditer(r"[^\n]*", text[start:end]):
        code = line.group(0)
        base = start + line.start()
        cut = _comment_start(code)
        for m in _TOKEN.finditer(code[:cut]):
            out.append(Token(m.group(0), base + m.start(), base + m.end()))
    return out


def _comment_start(line: str) -> int:
    quoted = False
    for i, ch in enumerate(line):
        if ch == "'":
            quoted = not quoted
        elif not quoted and line.startswith("--", i):
            return i
    return len(line)


@dataclass(frozen=True)
class Edit:
    start: int
    end: int
    replacement: str
    operator: str


def edits(text: str, query: Query) -> Iterator[Edit]:
    """Every single-edit mutant of one statement, by the operators above."""
    toks = tokens(text, query.start, query.end)
    yield from _drop_conjuncts(text, toks)
    yield from _flip_comparisons(toks)
    yield from _left_joins(toks)
    yield from _drop_locks(text, toks)
    yield from _relax_commits(text, toks, query)


def _operand_end(toks: list[Token], i: int) -> int:
    """Index of the last token of the operand that starts at ``toks[i]``."""
    depth = 0
    j = i
    while j < len(toks):
        t = toks[j]
        if t.text == "(":
            depth += 1
        elif t.text == ")":
            if depth == 0:
                return j - 1
            depth -= 1
        elif depth == 0 and j > i and (t.word in _STOP or t.text in (",", ";")):
            return j - 1
        j += 1
    return len(toks) - 1


def _operand_start(toks: list[Token], i: int) -> int | None:
    """Index of the first token of the operand that ends at ``toks[i]``, if it opens its
    chain (after ``WHERE``, ``ON``, ``WHEN`` or ``(``); None after ``AND``/``OR``."""
    depth = 0
    j = i
    while j >= 0:
        t = toks[j]
        if t.text == ")":
            depth += 1
        elif t.text == "(":
            if depth == 0:
                return j + 1
            depth -= 1
        elif depth == 0 and t.word in ("AND", "OR"):
            return None
        elif depth == 0 and t.word in ("WHERE", "ON", "WHEN"):
            return j + 1
        j -= 1
    return None


def _drop_conjuncts(text: str, toks: list[Token]) -> Iterator[Edit]:
    for i, t in enumerate(toks):
        if t.word != "AND" or i == 0 or i + 1 >= len(toks):
            continue
        last = _operand_end(toks, i + 1)
        if last > i:  # " AND b" goes
            yield Edit(toks[i - 1].end, toks[last].end, "", "drop_conjunct")
        first = _operand_start(toks, i - 1)
        if first is not None and first < i:  # "a AND " goes
            yield Edit(toks[first].start, toks[i + 1].start, "", "drop_conjunct")


def _flip_comparisons(toks: list[Token]) -> Iterator[Edit]:
    for i, t in enumerate(toks):
        if t.text in _FLIPS and (t.text != "=" or _compares(toks, i)):
            yield Edit(t.start, t.end, _FLIPS[t.text], "flip_comparison")
        elif t.word == "IS" and i + 1 < len(toks):
            nxt = toks[i + 1]
            if nxt.word == "NULL":
                yield Edit(t.start, nxt.end, "IS NOT NULL", "flip_comparison")
            elif nxt.word == "NOT" and i + 2 < len(toks) and toks[i + 2].word == "NULL":
                yield Edit(t.start, toks[i + 2].end, "IS NULL", "flip_comparison")


def _compares(toks: list[Token], i: int) -> bool:
    for j in range(i - 1, -1, -1):
        if toks[j].word in _CONTEXT:
            return toks[j].word in _CONDITION
    return False


def _left_joins(toks: list[Token]) -> Iterator[Edit]:
    for i, t in enumerate(toks[:-1]):
        if t.word == "LEFT" and toks[i + 1].word == "JOIN":
            yield Edit(t.start, toks[i + 1].start, "", "left_join")


def _drop_locks(text: str, toks: list[Token]) -> Iterator[Edit]:
    for i, t in enumerate(toks):
        if t.word != "FOR" or i + 1 >= len(toks):
            continue
        if toks[i + 1].word not in ("UPDATE", "SHARE", "NO", "KEY"):
            continue
        j = i
        while j + 1 < len(toks) and (toks[j + 1].word in _LOCK or toks[j].word == "OF"):
            j += 1
        skip = next((k for k in range(i, j) if toks[k].word == "SKIP"), None)
        yield Edit(toks[i - 1].end, toks[j].end, "", "drop_lock")
        if skip is not None:
            yield Edit(toks[skip - 1].end, toks[skip + 1].end, "", "drop_lock")


def _relax_commits(text: str, toks: list[Token], query: Query) -> Iterator[Edit]:
    body = text[query.start : query.end]
    settings = [m for m in _SETTING.finditer(body) if not _in_comment(body, m.start())]
    for m in settings:
        value = m.group("value")
        if value != "'off'":
            yield _span(query.start, m, "value", "'off'")
        if m.group("local") == "true":
            yield _span(query.start, m, "local", "false")
    words = {t.word for t in toks}
    if settings or not words & _WRITES:
        return
    where = next((t for t in toks if t.word == "WHERE"), None)
    if where is not None:
        after = next(t for t in toks if t.start > where.start)
        yield Edit(after.start, after.start, _RELAX, "relax_commit")


def _span(offset: int, m: re.Match[str], group: str, new: str) -> Edit:
    return Edit(offset + m.start(group), offset + m.end(group), new, "relax_commit")


def _in_comment(body: str, at: int) -> bool:
    line_start = body.rfind("\n", 0, at) + 1
    return _comment_start(body[line_start:]) < at - line_start


def mutants_of_file(
    text: str, file: str, *, names: Iterable[str] | None = None, module: str = "sql"
) -> list[Mutant]:
    """Every mutant of the named queries of one file (of ``names`` only, when given)."""
    wanted = None if names is None else set(names)
    out: list[Mutant] = []
    seen: set[str] = set()
    for query in queries(text, file):
        if wanted is not None and query.name not in wanted:
            continue
        for edit in edits(text, query):
            mutated = text[: edit.start] + edit.replacement + text[edit.end :]
            diff = unified_diff(text, mutated, file)
            ident = f"{module}:{query.name}:{edit.operator}:{digest(diff)}"
            if ident in seen or mutated == text:
                continue
            seen.add(ident)
            out.append(
                Mutant(
                    id=ident,
                    module=module,
                    where=query.name,
                    operator=edit.operator,
                    path=file,
                    mutated=mutated,
                    diff=diff,
                )
            )
    return out


def fenced_writes(text: str) -> list[str]:
    """The statements of a file that write under the fence (owner and generation)."""
    names = []
    for query in queries(text, "?"):
        words = {t.word for t in tokens(text, query.start, query.end)}
        body = text[query.start : query.end]
        if words & _WRITES and "%(owner)s" in body and "%(generation)s" in body:
            names.append(query.name)
    return names


def mutants(package: Path, *, names: Iterable[str] | None = None) -> list[Mutant]:
    """Every SQL mutant of the package's ``sql/*.sql`` named queries."""
    chosen = None if names is None else list(names)
    out: list[Mutant] = []
    for path in sorted((package / "sql").glob("*.sql")):
        if path.name in SKIP_FILES:
            continue
        text = path.read_text("utf-8")
        out += mutants_of_file(text, f"sql/{path.name}", names=chosen, module=f"sql/{path.name}")
    return out
