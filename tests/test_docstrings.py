"""Every public class and function says what it is for, and every error says when it is raised.

"Public" is what the packages export (``__all__``): ``help(agent_runtime.Agent)`` is the
first thing a newcomer tries. Public methods of the exported classes count too.
"""

from __future__ import annotations

import inspect
from types import ModuleType
from typing import Any

import pytest

import agent_runtime
import crashresume

PACKAGES = (agent_runtime, crashresume)


def _exported(package: ModuleType) -> list[tuple[str, Any]]:
    return [
        (f"{package.__name__}.{name}", getattr(package, name))
        for name in package.__all__
        if inspect.isclass(getattr(package, name)) or inspect.isfunction(getattr(package, name))
    ]


EXPORTED = [item for package in PACKAGES for item in _exported(package)]


def _own_doc(obj: Any) -> str:
    """The object's own docstring (a class does not count its base's)."""
    doc = obj.__dict__.get("__doc__") if inspect.isclass(obj) else obj.__doc__
    return inspect.cleandoc(doc or "")


def test_the_packages_export_something() -> None:
    assert len(EXPORTED) > 40


@pytest.mark.parametrize(("name", "obj"), EXPORTED, ids=[name for name, _ in EXPORTED])
def test_every_exported_class_and_function_has_a_docstring(name: str, obj: Any) -> None:
    assert len(_own_doc(obj).split()) >= 4, f"{name} has no docstring saying what it is for"


ERRORS = [(n, o) for n, o in EXPORTED if inspect.isclass(o) and issubclass(o, BaseException)]


@pytest.mark.parametrize(("name", "error"), ERRORS, ids=[name for name, _ in ERRORS])
def test_every_exported_error_says_when_it_is_raised(name: str, error: Any) -> None:
    assert "raised" in _own_doc(error).lower(), f"{name} does not say when it is raised"


METHODS = [
    (f"{name}.{attr}", member)
    for name, obj in EXPORTED
    if inspect.isclass(obj) and not issubclass(obj, BaseException)
    for attr, member in vars(obj).items()
    if not attr.startswith("_")
    and inspect.isfunction(
        member.fget if isinstance(member, property) else getattr(member, "__func__", member)
    )
]


@pytest.mark.parametrize(("name", "member"), METHODS, ids=[name for name, _ in METHODS])
def test_every_public_method_of_an_exported_class_has_a_docstring(name: str, member: Any) -> None:
    func = member.fget if isinstance(member, property) else getattr(member, "__func__", member)
    assert (func.__doc__ or "").strip(), f"{name} has no docstring"
