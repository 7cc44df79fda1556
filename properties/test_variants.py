"""The suite can fail: each deliberately broken runtime is caught by the ci profile.

For every variant the ci-profile machine must fail, shrink to a short schedule,
and save it; the saved schedule must fail again when replayed against the broken
runtime and pass against the real one (so it is the variant that is caught, not
the schedule).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from .invariants import Violation, Violations
from .machine import explore
from .runners import InProcessRunner, first_failure
from .variants import VARIANTS

MAX_SHRUNK = 6  # events; every variant so far shrinks to 2-4


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_the_ci_profile_catches_a_broken_runtime(
    variant: str,
    database_url: str,
    inprocess_runner: InProcessRunner,
    tmp_path: Path,
    record_property: Callable[[str, object], None],
) -> None:
    broken = InProcessRunner(database_url, variant=variant)
    try:
        result = explore(broken, profile="ci", name=variant, failures_dir=tmp_path)
        assert isinstance(result.error, Violation | Violations), (
            f"{variant} ({VARIANTS[variant].summary}) was not caught: {result.error!r}"
        )
        assert result.saved, "the shrunk failure was not saved"
        path, schedule = result.saved[-1]
        print(
            f"{variant}: caught after {result.examples} examples in {result.elapsed:.1f}s, "
            f"shrunk to {len(schedule.events)} events: "
            + "; ".join(str(e) for e in schedule.events)
            + f"\n  {schedule.failure}"
        )
        record_property("shrunk_length", len(schedule.events))
        assert path.exists() and schedule.variant == variant
        assert len(schedule.events) <= MAX_SHRUNK
        assert first_failure(broken, schedule.events) is not None
    finally:
        broken.close()
    assert first_failure(inprocess_runner, schedule.events) is None
