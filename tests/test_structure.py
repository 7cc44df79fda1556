"""The runtime's shape: no import circles, and a fresh interpreter imports every module alone.

The import graph comes from grimp, which reads every import statement, the ones inside
functions too: a circle closed by a lazy import is still a circle.
"""

from __future__ import annotations

import pkgutil
import subprocess
import sys

import grimp
import pytest

import agent_runtime

PACKAGE = "agent_runtime"


def _import_graph() -> dict[str, set[str]]:
    graph = grimp.build_graph(PACKAGE, cache_dir=None)
    return {module: graph.find_modules_directly_imported_by(module) for module in graph.modules}


def find_cycle(edges: dict[str, set[str]]) -> list[str] | None:
    """One import circle as ``[a, b, ..., a]``, or None when the graph has none."""
    finished: set[str] = set()
    for start in sorted(edges):
        if start in finished:
            continue
        path = [start]  # the depth-first walk from start, and what is left to visit at each
        pending = [sorted(edges.get(start, ()))]
        while path:
            if not pending[-1]:
                finished.add(path.pop())
                pending.pop()
                continue
            target = pending[-1].pop(0)
            if target in path:
                return [*path[path.index(target) :], target]
            if target not in finished:
                path.append(target)
                pending.append(sorted(edges.get(target, ())))
    return None


def test_the_cycle_finder_finds_a_lazy_circle_and_accepts_a_tree() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) is None


def test_no_module_of_the_runtime_imports_itself_through_others() -> None:
    cycle = find_cycle(_import_graph())
    assert cycle is None, "import circle: " + " -> ".join(cycle or [])


MODULES = sorted(
    info.name
    for info in pkgutil.walk_packages(agent_runtime.__path__, prefix=f"{PACKAGE}.")
    if not info.name.endswith("__main__")
)


@pytest.mark.parametrize("module", MODULES)
def test_each_module_imports_alone_in_a_fresh_interpreter(module: str) -> None:
    probe = subprocess.run(
        [sys.executable, "-W", "error", "-c", f"import {module}"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert probe.returncode == 0, probe.stderr
