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


def _import_graph(package: str = PACKAGE) -> dict[str, set[str]]:
    graph = grimp.build_graph(package, cache_dir=None)
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


def test_no_module_of_the_harness_imports_itself_through_others() -> None:
    cycle = find_cycle(_import_graph("crashresume"))
    assert cycle is None, "import circle: " + " -> ".join(cycle or [])


# The runtime's layers, lowest first (ARCHITECTURE "Packages"): a module imports its own
# layer and the ones below, never one above; packages on one layer import neither other.
LAYERS: tuple[frozenset[str], ...] = (
    frozenset(
        {
            "errors",
            "logfmt",
            "backoff",
            "crash",
            "_version",
            "hostid",
            "config",
            "clients",
            "duration",
        }
    ),
    frozenset({"store"}),
    frozenset({"localpg"}),  # reads its own SQL through store.queries
    frozenset({"observe"}),  # metrics and traces: the loop, the tools and the supervisor count
    frozenset({"tools"}),
    frozenset({"llm"}),
    frozenset({"loop"}),
    frozenset({"supervisor", "operator"}),
    frozenset({"ui"}),  # the dashboard: the operator's reads and actions in a browser
    frozenset({"cli", "demo", "conformance", "__main__", ""}),
)
LOOSE = LAYERS[0] | LAYERS[-1]  # loose modules, the base and the entry points: they may
# use each other


def _part(module: str) -> str:
    """The package (or loose module) of ``agent_runtime.<part>...``; "" for the root."""
    return module.removeprefix(PACKAGE).removeprefix(".").split(".")[0]


def _layer(part: str) -> int:
    return next(i for i, layer in enumerate(LAYERS) if part in layer)


def crossings(edges: dict[str, set[str]]) -> list[str]:
    """Every import that goes up a layer, or across to a sibling package."""
    wrong = []
    for importer, imported in sorted(edges.items()):
        for target in sorted(imported):
            if not target.startswith(PACKAGE):
                continue
            here, there = _part(importer), _part(target)
            if here == there:
                continue
            if _layer(there) > _layer(here) or (
                _layer(there) == _layer(here) and here not in LOOSE
            ):
                wrong.append(f"{importer} -> {target}")
    return wrong


def test_the_layer_check_refuses_an_import_up_or_across_and_accepts_one_down() -> None:
    up = {"agent_runtime.store.db": {"agent_runtime.loop.worker"}}
    across = {"agent_runtime.operator.views": {"agent_runtime.supervisor.main"}}
    down = {"agent_runtime.loop.worker": {"agent_runtime.store.db", "agent_runtime.errors"}}
    assert crossings(up) == ["agent_runtime.store.db -> agent_runtime.loop.worker"]
    assert crossings(across) == ["agent_runtime.operator.views -> agent_runtime.supervisor.main"]
    assert crossings(down) == []


def test_every_part_of_the_runtime_has_a_layer() -> None:
    parts = {_part(m) for m in _import_graph()}
    assert parts <= set().union(*LAYERS), parts - set().union(*LAYERS)


def test_imports_go_down_the_layers_only() -> None:
    wrong = crossings(_import_graph())
    assert wrong == [], "imports against the layers:\n" + "\n".join(wrong)


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
