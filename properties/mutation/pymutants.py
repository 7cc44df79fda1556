"""The Python mutants of a runtime module, made by cosmic-ray's operators.

cosmic-ray (``cosmic_ray.plugins``, ``cosmic_ray.ast``, ``cosmic_ray.mutating``) finds
where each of its core operators applies (comparisons, binary and unary operators,
``and``/``or``, ``True``/``False``, ``not``, numbers, ``break``/``continue``, exception
types, decorators, loops run zero times) and writes the mutated module; its test runner
(``cosmic_ray.testing.run_tests``) runs the killing command with a wall-clock timeout that
takes the whole process group down. Operators that need arguments (variable replacers)
are not used, as in cosmic-ray's own ``init`` without configuration.

Four kinds of place are left out, each equivalent by construction, and counted in the
report: annotations (every module has ``from __future__ import annotations``: an
annotation is a string nobody evaluates, so ``str | None`` -> ``str - None`` changes
nothing), the arguments of ``log.*(...)`` calls, and the f-string or literal message of
a ``raise E(...)`` (only the text a person reads changes; ``retries + 1`` in "did not get
through in N attempt(s)" survived every schedule, as it must), and the keyword-only
marker ``*`` of a parameter list, which cosmic-ray reads as a multiplication (``-`` is
not Python; ``/`` binds every call as before).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from cosmic_ray import plugins
from cosmic_ray.ast import ast_nodes, get_ast
from cosmic_ray.ast.ast_query import ASTQuery
from cosmic_ray.mutating import mutate_code

from . import tiers
from .mutants import Mutant, digest, unified_diff

# The protocol's modules by the short name mutant ids carry, and where each file lives.
PATHS: Final = {
    "worker": "loop/worker.py",
    "stopping": "loop/stopping.py",
    "outcome": "loop/outcome.py",
    "acting": "tools/acting.py",
    "deciding": "llm/deciding.py",
    "conversation": "llm/conversation.py",
    "journal": "store/journal.py",
    "claiming": "loop/claiming.py",
    "lease": "loop/lease.py",
    "supervisor": "supervisor/main.py",
    "supervision": "supervisor/supervision.py",
    "takeback": "supervisor/takeback.py",
    "unserved": "supervisor/unserved.py",
    "workerpool": "supervisor/workerpool.py",
}
PROTOCOL: Final = tuple(PATHS)
# Every module mutated, either tier's (tiers.PY_TESTS: killed by their tests/ files).
ALL_PATHS: Final = {**PATHS, **{name: path for name, (path, _) in tiers.PY_TESTS.items()}}
LOGGERS: Final = frozenset({"log", "logger"})

Position = tuple[int, int]  # (line, column), as parso and ast count them


@dataclass(frozen=True, kw_only=True)
class Place:
    """Where one operator applies once: cosmic-ray's (operator, occurrence)."""

    operator: str
    occurrence: int
    start: Position
    end: Position
    definition: str


@dataclass(frozen=True)
class Spans:
    """Source spans whose mutants are equivalent by construction, and why."""

    spans: list[tuple[Position, Position, str]]

    def reason(self, start: Position, end: Position) -> str | None:
        for first, last, why in self.spans:
            if first <= start and end <= last:
                return why
        return None


def excluded_spans(source: str) -> Spans:
    """Annotations and logging calls of a module."""
    spans: list[tuple[Position, Position, str]] = []

    def add(node: ast.AST | None, why: str) -> None:
        if node is not None and hasattr(node, "end_lineno"):
            spans.append(
                (
                    (node.lineno, node.col_offset),  # type: ignore[attr-defined]
                    (node.end_lineno, node.end_col_offset),  # type: ignore[attr-defined]
                    why,
                )
            )

    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.arg):
            add(node.annotation, "annotation")
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            add(node.returns, "annotation")
        elif isinstance(node, ast.AnnAssign):
            add(node.annotation, "annotation")
        elif isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call):
            for arg in node.exc.args:
                if isinstance(arg, ast.JoinedStr | ast.Constant):
                    add(arg, "exception message")
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id in LOGGERS
        ):
            add(node, "log call")
    return Spans(spans)


def operator_names() -> list[str]:
    """cosmic-ray's core operators that take no arguments (its ``init`` default)."""
    return [
        name
        for name in plugins.operator_names()
        if name.startswith("core/") and not plugins.get_operator(name).arguments()
    ]


def places(source: str) -> Iterator[Place]:
    """Every (operator, occurrence) of cosmic-ray's operators in ``source``."""
    tree = get_ast(source)
    for name in operator_names():
        operator = plugins.get_operator(name)()
        occurrence = 0
        for node in ast_nodes(tree):
            for start, end in operator.mutation_positions(node):
                yield Place(
                    operator=name,
                    occurrence=occurrence,
                    start=start,
                    end=end,
                    definition=ASTQuery(node).get_definition_name() or "<module>",
                )
                occurrence += 1


@dataclass(frozen=True)
class ModuleMutants:
    module: str
    mutants: list[Place]  # the places to mutate
    excluded: dict[str, int]  # reason: count of places left out


def enumerate_module(package: Path, module: str) -> ModuleMutants:
    source = (package / ALL_PATHS[module]).read_text("utf-8")
    spans = excluded_spans(source)
    kept: list[Place] = []
    excluded: dict[str, int] = {}
    for place in places(source):
        why = spans.reason(place.start, place.end)
        if _is_marker(source, place.start):
            why = "keyword-only marker '*', not an operator"
        if why is None:
            kept.append(place)
        else:
            excluded[why] = excluded.get(why, 0) + 1
    return ModuleMutants(module, kept, excluded)


def _repeats(source: str, definition: str, line: int) -> int:
    """How many lines of ``definition`` before ``line`` read exactly as it does. The same
    change of two such lines (``return False`` -> ``return True`` twice in one function)
    has the same digest; the second and later get ``-2``, ``-3`` after it, so every
    mutant keeps an id of its own and a line's first copy keeps the id it had."""
    lines = source.splitlines()
    head = re.compile(rf"^\s*(async\s+)?(def|class)\s+{re.escape(definition)}\b")
    start = next((n for n in range(line - 1, -1, -1) if head.match(lines[n])), 0)
    return sum(1 for n in range(start, line - 1) if lines[n] == lines[line - 1])


def _is_marker(source: str, start: Position) -> bool:
    line, column = start
    text = source.splitlines()[line - 1]
    return text[column : column + 1] == "*" and text[column + 1 :].lstrip()[:1] in (",", ")")


def mutant(package: Path, module: str, place: Place) -> Mutant | None:
    """The mutant of one place (None if cosmic-ray finds nothing to change there, or the
    mutant is not Python: cosmic-ray reads the ``**`` of ``{**row}`` as a power, and
    ``{|row}`` is no mutant of anything)."""
    path = ALL_PATHS[module]
    source = (package / path).read_text("utf-8")
    if _is_marker(source, place.start):
        return None
    operator: Any = plugins.get_operator(place.operator)()
    mutated = mutate_code(source, operator, place.occurrence)
    if mutated is None or mutated == source:
        return None
    try:
        compile(mutated, path, "exec")
    except SyntaxError:  # "**row" in a dict display read as a power: "{|row}"
        return None
    diff = unified_diff(source, mutated, path)
    short = place.operator.removeprefix("core/")
    again = _repeats(source, place.definition, place.start[0])
    return Mutant(
        id=f"{module}:{place.definition}:{short}:{digest(diff)}"
        + (f"-{again + 1}" if again else ""),
        module=module,
        where=place.definition,
        operator=short,
        path=path,
        mutated=mutated,
        diff=diff,
    )
