"""The worker's public API with its defaults (``properties/api_corners.py``): it holds, and
each slip of a default, an agent choice or a close that the runners never call is caught
(each as the mutation driver writes it; all of them survived the e round)."""

from __future__ import annotations

import pytest

from agent_runtime.llm import deciding
from agent_runtime.loop import worker

from . import api_corners
from .api_corners import check_api
from .planting import plant_python
from .runners import InProcessRunner

RUN_TAKEOVER = "        takeover: bool = False"  # run's, not claim's
WENT_ON = "expected RunUnavailable, the worker went on"


def test_the_workers_api_keeps_its_defaults(runner: InProcessRunner) -> None:
    assert check_api(runner) == []


@pytest.mark.parametrize(
    ("old", "new", "said"),
    [
        ("create: bool = True,", "create: bool = False,", "RunNotFound"),
        (f"{RUN_TAKEOVER},\n        task", f"{RUN_TAKEOVER[:-5]}True,\n        task", WENT_ON),
        ("takeover: bool = False) -> Lease", "takeover: bool = True) -> Lease", WENT_ON),
        ("if len(self.agents) != 1:", "if len(self.agents) < 1:",
         "expected UnknownAgentChoice, the worker went on"),
        ("if len(self.agents) != 1:", "if len(self.agents) > 1:",
         "expected UnknownAgentChoice, the worker raised StopIteration"),
        ("    @classmethod\n    def open(", "    def open(", "TypeError"),
        ("for close in closers:", "for close in []:", "close() left open its model client (False) "
         "or its tools' (True)"),
    ],
)  # fmt: skip
def test_a_slip_of_the_workers_api_is_caught(
    runner: InProcessRunner, monkeypatch: pytest.MonkeyPatch, old: str, new: str, said: str
) -> None:
    planted = plant_python(monkeypatch, worker, old, new)
    monkeypatch.setattr(api_corners, "Worker", planted.Worker)
    try:
        found = "\n".join(check_api(runner))
    except Exception as exc:  # a slip may break the call itself: the command counts it too
        found = f"{type(exc).__name__}: {exc}"
    assert said in found


def test_a_decider_that_closes_no_model_is_caught(
    runner: InProcessRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    old = "for model in {id(m): m for m in [*self._models.values(), self._model] if m}.values():"
    planted = plant_python(monkeypatch, deciding, old, "for model in []:")
    monkeypatch.setattr(worker.Worker, "decider_class", planted.Decider)
    said = "close() left open its model client (True) or its tools' (False)"
    assert said in check_api(runner)
