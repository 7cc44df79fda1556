"""The pytest plugin's ``conform`` fixture, run in a scratch pytest session (pytester)."""

from __future__ import annotations

import pytest

# pytester is declared here, not in tests/harness/conftest.py: pytest refuses
# `pytest_plugins` in a conftest below the root one when the whole suite is collected.
pytest_plugins = ["pytester"]

AGENTS = """
class Store:
    def __init__(self):
        self.done = set()

class Agent:
    KEYED = True

    def __init__(self, ctx, store):
        self.ctx, self.store = ctx, store

    def step(self, job):
        if job in self.store.done:
            return
        self.ctx.effect("charge", job, key=f"charge:{job}" if self.KEYED else None)
        self.store.done.add(job)

class Unkeyed(Agent):
    KEYED = False

def factory(agent):
    stores = {}
    return lambda ctx: agent(ctx, stores.setdefault(ctx.run_id, Store()))
"""


def test_the_conform_fixture_returns_the_report_of_a_passing_subject(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(plugin_subjects=AGENTS)  # not "agents": openai-agents owns that name
    pytester.makepyfile(
        """
        from plugin_subjects import Agent, factory

        def test_agent_is_crash_safe(conform):
            report = conform(factory(Agent), inputs=["a", "b", "c"])
            assert report.passed
            assert report.scenarios == [
                "run-before-1", "run-1", "run-before-2", "run-2", "run-before-3", "run-3"
            ]
        """
    )

    result = pytester.runpytest("-p", "no:cacheprovider")

    result.assert_outcomes(passed=1)


def test_the_conform_fixture_fails_the_test_with_the_report_text(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(plugin_subjects=AGENTS)  # not "agents": openai-agents owns that name
    pytester.makepyfile(
        """
        from plugin_subjects import Unkeyed, factory

        def test_agent_is_crash_safe(conform):
            conform(factory(Unkeyed), inputs=["a", "b"])
            raise AssertionError("not reached: the fixture failed the test")
        """
    )

    result = pytester.runpytest("-p", "no:cacheprovider")

    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "crashresume: FAILED: make_agent over 2 inputs, 2 findings in 4 crash scenarios*",
            "duplicate_effect: 2 scenarios",
            "  run-1 (the first run died right after effect call 1):",
            "    charge('a') happened 2 times, once in the baseline",
            "    rerun: conform(make_agent, inputs=['a', 'b'], only='run-1')",
        ]
    )
    result.stdout.no_fnmatch_line("*not reached*")


def test_the_conform_fixture_passes_options_through(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(plugin_subjects=AGENTS)  # not "agents": openai-agents owns that name
    pytester.makepyfile(
        """
        from plugin_subjects import Unkeyed, factory

        def test_only_the_baselines(conform):
            report = conform(factory(Unkeyed), inputs=["a", "b"], only="run")
            assert report.scenarios == []
        """
    )

    pytester.runpytest("-p", "no:cacheprovider").assert_outcomes(passed=1)


def test_the_conform_fixture_takes_repeat_and_scenarios_and_fails_with_their_counts(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(plugin_subjects=AGENTS)  # not "agents": openai-agents owns that name
    pytester.makepyfile(
        """
        from plugin_subjects import Unkeyed, factory

        def test_agent_is_crash_safe(conform):
            conform(factory(Unkeyed), inputs=["a"], repeat=3, scenarios=["crash", "overlap"])
        """
    )

    result = pytester.runpytest("-p", "no:cacheprovider")

    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "crashresume: FAILED: make_agent over 1 input, 4 findings in 4 crash scenarios*"
            "repeat=3)",
            "duplicate_effect: 3 scenarios",
            "  run-1 (the first run died right after effect call 1), in 3/3 runs:",
            "    rerun: conform(make_agent, inputs=['a'], only='run-1', repeat=3)",
            "overlap: 1 scenario",
            "  run-overlap-before-1 (the first run froze right before effect call 1, *), in 3/3*",
        ]
    )


def test_the_plugin_is_registered_through_its_entry_point(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--fixtures", "-p", "no:cacheprovider")

    result.stdout.fnmatch_lines(["conform -- *crashresume*plugin.py*", "*fail the test*"])
