"""ConformMachine.fault_next_effect: faults as rules, beside crashes and restarts."""

from __future__ import annotations

from typing import Any

import pytest

from crashresume import Context, UsageError

from .subjects import MemoryStore, SeedAgent

pytest.importorskip("hypothesis", reason="the state machine needs Hypothesis")

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import rule, run_state_machine_as_test

from crashresume.stateful import ConformMachine

STORES: dict[str, MemoryStore] = {}
FAST = settings(
    max_examples=100,
    stateful_step_count=10,
    deadline=None,
    database=None,
    report_multiple_bugs=False,
    derandomize=True,
)


class RetriesWithoutKey(SeedAgent):
    """Bug: a charge that timed out is retried at once without its key."""

    def charge(self, job: str) -> Any:
        try:
            return super().charge(job)
        except TimeoutError:
            return self.ctx.effect("charge", job)


def machine_for(agent: type[SeedAgent]) -> type[ConformMachine]:
    class Machine(ConformMachine):
        def make_agent(self, ctx: Context) -> Any:
            return agent(ctx, STORES.setdefault(ctx.run_id, MemoryStore()))

        @rule(job=st.sampled_from(["a", "b", "c"]))
        def new_job(self, job: str) -> None:
            self.feed(job)

        @rule(kind=st.sampled_from(["lost", "fail", "slow", "malformed"]))
        def fault(self, kind: str) -> None:
            self.fault_next_effect(kind)

        @rule()
        def restart(self) -> None:
            self.restart_subject()

    Machine.__name__ = f"{agent.__name__}Machine"
    return Machine


def test_a_keyed_agent_without_any_retry_survives_faults_in_any_order() -> None:
    run_state_machine_as_test(machine_for(SeedAgent), settings=FAST)


def test_a_retry_without_the_key_fails_the_machine_as_a_duplicate() -> None:
    with pytest.raises(AssertionError, match=r"^duplicate_effect: charge"):
        run_state_machine_as_test(machine_for(RetriesWithoutKey), settings=FAST)


def test_an_unknown_fault_kind_is_refused() -> None:
    class Bad(ConformMachine):
        def make_agent(self, ctx: Context) -> Any:
            return SeedAgent(ctx, STORES.setdefault(ctx.run_id, MemoryStore()))

        @rule()
        def fault(self) -> None:
            self.feed("a")
            self.fault_next_effect("late")

    with pytest.raises(UsageError, match="'late' is not a fault kind; use one of 'lost'"):
        run_state_machine_as_test(Bad, settings=FAST)
