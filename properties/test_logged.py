"""The ``replayed`` and ``outcome`` checks against the slips they exist to catch: a worker
that finishes a run on a decision an earlier owner journaled and never says so
(``properties/logged.py``), and the outcome of a run found done told wrong
(``properties/outcomes.py``); and a worker of one agent that will not start a run without
its name (``pilots.enter``)."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from typing import Any

import pytest

from agent_runtime.loop import claiming, outcome, stopping, worker
from agent_runtime.loop.outcome import Outcome, UnknownAgentChoice
from agent_runtime.store.journal import Journal
from agent_runtime.tools import acting
from agent_runtime.tools.agent import Agent, by_name

from . import handback
from .events import Event
from .minimise import first_failure
from .planting import caught_with_edit, plant_python
from .runners import InProcessRunner
from .scope import story

# the provisioning run's final answer is step 3: a crash right after it was journaled
FINAL_DECIDED_THEN_CRASH = story("provisioning", "crash", "after_decide", 3)


class _Unsaid:
    """``worker.log`` as ``_drive``'s ``!=`` -> ``>`` mutant (1454b083) leaves it: no
    ``replayed`` line, every other line as before."""

    def __init__(self, log: logging.Logger) -> None:
        self._log = log

    def info(self, msg: str, *args: Any, **kwargs: Any) -> None:
        if not msg.startswith("replayed "):
            self._log.info(msg, *args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._log, name)


def test_a_run_finished_on_a_replayed_final_decision_says_so(
    runner: InProcessRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert first_failure(runner, FINAL_DECIDED_THEN_CRASH) is None
    monkeypatch.setattr(worker, "log", _Unsaid(worker.log))
    found = first_failure(runner, FINAL_DECIDED_THEN_CRASH)
    assert found is not None
    assert "[replayed] run r0 step 3: generation 2 finished the run" in str(found)


def test_the_outcome_of_a_run_found_done_is_the_journals(
    runner: InProcessRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A restart after the run finished: ``Worker.run`` finds it done (``already_done``)."""
    events = (*FINAL_DECIDED_THEN_CRASH, Event(op="restart", run=0))
    assert first_failure(runner, events) is None
    real = outcome.already_done

    def doubled(journal: Journal, run_id: str) -> Outcome:  # the `sum(2 ...)` mutant's
        return dataclasses.replace(real(journal, run_id), steps=6)

    monkeypatch.setattr(worker, "already_done", doubled)
    found = first_failure(runner, events)
    assert found is not None
    assert "[outcome] run r0: w3 returned steps=6, the journal 3 resolved calls" in str(found)


def _chosen_of_none(self: worker.Worker, agent: Agent | str | None) -> Agent:
    """``Worker._chosen`` as its ``!= 1`` -> ``!= 0`` mutant (e266d3f8) has it: a worker of
    one agent refuses a new run that does not name it."""
    if agent is None and len(self.agents) != 0:
        raise UnknownAgentChoice(sorted(self.agents))
    return real_chosen(self, agent)


def _chosen_not_joined(self: worker.Worker, agent: Agent | str | None) -> Agent:
    """``Worker._chosen`` as its ``is not`` -> ``==`` mutant (7b791d63) has it: an agent
    handed over at start never joins the worker's."""
    if isinstance(agent, Agent):
        if self.agents.get(agent.name) == agent:
            self.agents = by_name([*self.agents.values(), agent])
        return agent
    return real_chosen(self, agent)


real_chosen = worker.Worker._chosen


@pytest.mark.parametrize(
    ("kind", "slip", "caught"),
    [
        ("provisioning", _chosen_of_none, "stopped with UnknownAgentChoice"),  # by default
        ("support", _chosen_not_joined, "stopped with UnknownAgent:"),  # handed over
    ],
)
def test_a_new_run_takes_the_workers_only_agent_or_the_one_handed_over(
    runner: InProcessRunner,
    monkeypatch: pytest.MonkeyPatch,
    kind: str,
    slip: Callable[[worker.Worker, Agent | str | None], Agent],
    caught: str,
) -> None:
    """Each suite worker has its run's agent alone, and a new run names none (the default
    of a worker of one agent), or none and is handed its agent (``pilots.enter``)."""
    events = (Event(op="start", run=0, agent=kind),)
    assert first_failure(runner, events) is None
    monkeypatch.setattr(worker.Worker, "_chosen", slip)
    found = first_failure(runner, events)
    assert found is not None
    assert caught in str(found)


@pytest.mark.parametrize(
    ("params", "caught"),
    [
        ({"frozen": False}, "can be changed after it was returned"),  # seed 41's 5656ac47
        ({"kw_only": False}, "made from positional arguments"),  # seed 43's 4b7ba424
    ],
)
def test_the_outcome_is_of_its_public_type(
    runner: InProcessRunner, monkeypatch: pytest.MonkeyPatch, params: dict[str, bool], caught: str
) -> None:
    events = (Event(op="start", run=0, agent="support"),)
    assert first_failure(runner, events) is None
    fields = [
        (f.name, f.type, dataclasses.field(default=f.default)) for f in dataclasses.fields(Outcome)
    ]
    options: dict[str, Any] = {"frozen": True, "kw_only": True, **params}
    made = dataclasses.make_dataclass("Outcome", fields, **options)
    monkeypatch.setattr(worker, "Outcome", made)
    monkeypatch.setattr(handback, "Outcome", made)  # the slip is in the public class itself
    found = first_failure(runner, events)
    assert found is not None
    assert caught in str(found)


def test_a_worker_that_stopped_on_an_error_marks_it_said(
    runner: InProcessRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An outage: the worker stops resumably, its ERROR line said by ``stop_on_error``,
    which marks the error reported for the process edge (``c1425634`` leaves it unset)."""
    events = story("provisioning", "outage", "", 0, "create_server")
    assert first_failure(runner, events) is None
    real = stopping.stop_on_error

    def unmarked(*args: Any, **kwargs: Any) -> None:
        real(*args, **kwargs)
        args[3].reported = False  # the exception it was given

    monkeypatch.setattr(stopping, "stop_on_error", unmarked)
    found = first_failure(runner, events)
    assert found is not None
    assert "[reported] run r0: w1 stopped with RemoteUnavailable, said in `stopped run=r0" in str(
        found
    )


def test_a_read_tools_retry_journals_no_send(
    runner: InProcessRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The desk's tools have their contracts as configuration gives them (equal to the
    runtime's literals, never the same objects: ``agents.configured``), so acting's
    ``tool.effect is not "read"`` (``e3abecee``) journals a send for a lookup's retry."""
    events = story("support", "remote_fault", "", 0, "lookup_order")
    assert first_failure(runner, events) is None
    planted = plant_python(
        monkeypatch,
        acting,
        'if again and tool.effect != "read":',
        'if again and tool.effect is not "read":',
    )
    monkeypatch.setattr(acting.Actor, "_attempts", planted.Actor._attempts)
    found = first_failure(runner, events)
    assert found is not None
    assert "[read_sends] run r0 step 0: a read call journaled 2 sends" in str(found)


def test_a_worker_handed_a_lease_alone_reads_its_run(
    runner: InProcessRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The sweep's claim of a desk run hands its worker the lease without the task (the
    API's None: read the run), so ``Worker.run``'s ``task is not None`` (``b8c2c574``)
    drives no task."""
    events = story("support", "overtaken", "after_intent", 0)
    assert first_failure(runner, events) is None
    planted = plant_python(
        monkeypatch,
        worker,
        "if task is None or lease is None:",
        "if task is not None or lease is None:",
    )
    monkeypatch.setattr(worker.Worker, "run", planted.Worker.run)
    found = first_failure(runner, events)
    assert found is not None
    assert "stopped with AttributeError" in str(found) or "UnexpectedError" in str(found)


def test_a_plain_start_of_a_run_a_live_worker_holds_is_refused(
    runner: InProcessRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    """At a restart of a run its live worker holds, a plain claim (no takeover) is refused
    (``rival.py``); ``claim_run``'s ``lease_live or (...)`` (``d25e9bbf``) takes it."""
    events = story("support", "outpaced", "after_intent", 0)
    old = "if run.lease_live and (takeover or dead):"
    edit = (claiming, old, old.replace(" and ", " or "))
    found = caught_with_edit(
        runner, events, monkeypatch, edit, take="claim_run", put=(claiming, "claim_run")
    )
    assert "[rival] run r0: a plain start (no takeover) of the run held by the live" in found
