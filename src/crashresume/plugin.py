"""pytest plugin (entry point ``pytest11: crashresume``): the ``conform`` fixture.

It imports nothing of the harness at load time; the harness is imported when a test first
asks for the fixture.

    def test_agent_is_crash_safe(conform):
        conform(make_agent, inputs=["a", "b", "c"])
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from collections.abc import Callable

    from crashresume._report import Report


@pytest.fixture
def conform() -> Callable[..., Report]:
    """``conform(make_agent, inputs, **options)``: fail the test with the report unless it passes.

    Returns the ``Report`` when it passes; accepts the options of ``crashresume.conform``.
    """
    from crashresume._conform import conform as run_conform

    def check(make_agent: Callable[..., Any], inputs: Any, **options: Any) -> Report:
        report = run_conform(make_agent, inputs, **options)
        if not report.passed:
            pytest.fail(str(report), pytrace=False)
        return report

    return check
