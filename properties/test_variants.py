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

from .background import BackgroundFinding
from .exploring import Exploration
from .runners import InProcessRunner, first_failure
from .server import SuiteDatabase
from .variants import VARIANTS
from .variants.mutations import EDITS, statement
from .violations import Violation, Violations

MAX_SHRUNK = 8  # events a shrunk schedule may keep
# Variants that became equivalent to the runtime: what they break is guarded twice now.
# (heartbeat_ignored was one from issue 21's point 3 until gap class 19: the journal guards
# every effect and the model call, but only the heartbeat's flag stands before a read, and
# fenced_act counts the desk's lookups now.)
EQUIVALENT: dict[str, str] = {}


@pytest.mark.parametrize(
    "variant",
    [
        pytest.param(v, marks=pytest.mark.xfail(strict=True, reason=EQUIVALENT[v]))
        if v in EQUIVALENT
        else v
        for v in VARIANTS
    ],
)
def test_the_ci_profile_catches_a_broken_runtime(
    variant: str,
    suite_database: SuiteDatabase,
    inprocess_runner: InProcessRunner,
    tmp_path: Path,
    record_property: Callable[[str, object], None],
    explored: Callable[[InProcessRunner, Path], Exploration],
) -> None:
    broken = InProcessRunner(suite_database.url, variant=variant, server=suite_database)
    try:
        result = explored(broken, tmp_path)  # the background's, run on the other core
        error = result.error  # a background's comes back as text, its class named
        found = error.kind if isinstance(error, BackgroundFinding) else type(error).__name__
        assert found in (Violation.__name__, Violations.__name__), (
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
        record_property("caught_by", str(result.error).split("]")[0].lstrip("["))
        assert path.exists() and schedule.variant == variant
        assert len(schedule.events) <= MAX_SHRUNK
        assert first_failure(broken, schedule.events) is not None
    finally:
        broken.close()
    assert first_failure(inprocess_runner, schedule.events) is None


@pytest.mark.parametrize("name", sorted(EDITS))
def test_every_broken_statement_is_one_edit_of_todays_runtime(name: str) -> None:
    edited = statement(name).as_string(None)
    assert edited != ""
    assert EDITS[name].base != name
