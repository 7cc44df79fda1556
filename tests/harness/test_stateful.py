"""crashresume.stateful.ConformMachine: an agent author's rules with the harness's invariants."""

from __future__ import annotations

from typing import Any

import pytest

from crashresume import Context, UsageError

from .subjects import ForgetfulAgent, MemoryStore, SavesFirstAgent, SeedAgent, UnkeyedAgent

pytest.importorskip("hypothesis", reason="the state machine needs Hypothesis")

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import rule, run_state_machine_as_test

from crashresume.stateful import ConformMachine

STORES: dict[str, MemoryStore] = {}
FAST = settings(
    max_examples=150,
    stateful_step_count=12,
    deadline=None,
    database=None,
    report_multiple_bugs=False,
    derandomize=True,  # the same schedules every run: a broken agent is found every time
)


def machine_for(agent: type[SeedAgent]) -> type[ConformMachine]:
    class Machine(ConformMachine):
        def make_agent(self, ctx: Context) -> Any:
            return agent(ctx, STORES.setdefault(ctx.run_id, MemoryStore()))

        @rule(job=st.sampled_from(["a", "b", "c", "d"]))
        def new_job(self, job: str) -> None:
            self.feed(job)

        @rule(before=st.booleans())
        def crash(self, before: bool) -> None:
            self.crash_next_effect(before=before)

        @rule()
        def restart(self) -> None:
            self.restart_subject()

        @rule()
        def kill(self) -> None:
            self.kill_subject()

    Machine.__name__ = f"{agent.__name__}Machine"
    return Machine


def test_the_seed_agent_survives_any_interleaving_of_inputs_crashes_and_restarts() -> None:
    run_state_machine_as_test(machine_for(SeedAgent), settings=FAST)


@pytest.mark.parametrize(
    ("agent", "kind"),
    [
        (UnkeyedAgent, "duplicate_effect"),
        (SavesFirstAgent, "effect_lost"),
        (ForgetfulAgent, "state_lost"),
    ],
)
def test_each_broken_agent_fails_the_machine_with_the_kind_conform_would_report(
    agent: type[SeedAgent], kind: str
) -> None:
    with pytest.raises(AssertionError, match=f"^{kind}: "):
        run_state_machine_as_test(machine_for(agent), settings=FAST)


def test_a_machine_without_make_agent_says_how_to_fix_it() -> None:
    class NoFactory(ConformMachine):
        @rule()
        def nothing(self) -> None:
            pass

    with pytest.raises(UsageError, match=r"NoFactory must define make_agent\(self, ctx\)"):
        NoFactory()
