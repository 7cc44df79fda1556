"""Slips planted in this process's runtime, for the tests that show a check catches the
mutant it exists for (each as the mutation driver writes it), and a schedule's failure as
text."""

from __future__ import annotations

import functools
import inspect
import types
import warnings
from collections.abc import Callable
from importlib import resources
from typing import Any

import pytest

from agent_runtime.store.queries import runtime_queries, split_named

from .events import Event
from .minimise import first_failure
from .mutation import sqlmutants
from .runner import ScheduleRunner
from .runners import InProcessRunner


def failure(runner: ScheduleRunner, events: tuple[Event, ...]) -> str:
    found = first_failure(runner, events)
    return "" if found is None else str(found)


def caught_with(
    runner: InProcessRunner, events: tuple[Event, ...], slip: Callable[[], object]
) -> str:
    """``events`` pass on the real runtime, and fail once ``slip`` has planted its slip:
    how they fail (a slip nothing catches fails the calling test)."""
    assert failure(runner, events) == ""
    slip()
    found = failure(runner, events)
    assert found, "the slip was not caught"
    return found


def caught_with_edit(
    runner: InProcessRunner,
    events: tuple[Event, ...],
    monkeypatch: pytest.MonkeyPatch,
    edit: tuple[Any, str, str],
    *,
    take: str,
    put: tuple[Any, str],
) -> str:
    """:func:`caught_with` of one mutant as the driver writes it: ``edit`` is (module, old,
    new), ``take`` the dotted name of what the edited module made (``"Actor._attempts"``),
    put where the runtime looks it up (``put``: an object and an attribute)."""
    module, old, new = edit
    planted = functools.reduce(
        getattr, take.split("."), plant_python(monkeypatch, module, old, new)
    )
    return caught_with(runner, events, lambda: monkeypatch.setattr(*put, planted))


def plant_sql(monkeypatch: pytest.MonkeyPatch, mutant_id: str) -> None:
    """The runtime runs the SQL mutant ``mutant_id`` (the mutation report's id) of one of
    its statements, in this process."""
    file, name = mutant_id.split(":")[:2]  # sql/<file>.sql, the statement's name
    text = resources.files("agent_runtime").joinpath(*file.split("/")).read_text("utf-8")
    (mutant,) = [
        m
        for m in sqlmutants.mutants_of_file(text, file, names=[name], module=file)
        if m.id == mutant_id
    ]
    texts = runtime_queries()._texts  # the one statement swapped; monkeypatch undoes it
    monkeypatch.setitem(texts, name, split_named(mutant.mutated)[name])


def plant_python(monkeypatch: pytest.MonkeyPatch, module: Any, old: str, new: str) -> Any:
    """``module`` made again from its source with ``old`` replaced by ``new`` (one mutant,
    as the driver writes it), its classes and functions put in place of the real ones."""
    source = inspect.getsource(module)
    assert source.count(old) == 1
    planted = types.ModuleType(module.__name__)
    planted.__dict__.update({"__file__": module.__file__, "__name__": module.__name__})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SyntaxWarning)  # `is not` with a literal
        exec(compile(source.replace(old, new), module.__file__, "exec"), planted.__dict__)
    return planted
