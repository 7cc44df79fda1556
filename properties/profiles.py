"""Hypothesis profiles of the property suite: ``dev``, ``ci`` and ``nightly``.

``HYPOTHESIS_PROFILE`` picks one; without it the suite uses ``ci`` when ``CI=true``
(what GitHub Actions sets) and ``dev`` otherwise.

=========  ==============================================================================
profile    meaning
=========  ==============================================================================
dev        quick and random; remembers failing examples in ``.hypothesis/`` (git-ignored)
ci         deterministic (``derandomize=True``: the same schedules every run), bounded so
           the whole ``pytest properties/`` stays under five minutes on two cores; no
           example database
nightly    randomised and large; the seed is logged, failing schedules are saved, the
           example database lives where ``PROPERTIES_EXAMPLE_DB`` says (uploaded by the
           nightly workflow)
=========  ==============================================================================

Every profile sets ``deadline=None``: a schedule's duration depends on the database.
"""

from __future__ import annotations

import os
from typing import Final

from hypothesis import HealthCheck, Phase, settings
from hypothesis.database import DirectoryBasedExampleDatabase

PROFILES: Final = ("dev", "ci", "nightly")
EXAMPLE_DB: Final = ".hypothesis/examples"

_COMMON: Final = {
    "deadline": None,
    # No explain phase: after shrinking it would run the failing schedule dozens of times
    # more to guess which events matter; the saved schedule and its trace say that already.
    "phases": (Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink),
    "suppress_health_check": [HealthCheck.too_slow, HealthCheck.filter_too_much],
    "print_blob": False,
    # One finding per run: every violation is an AssertionError raised from a few places,
    # which Hypothesis would otherwise report (and shrink) as distinct bugs.
    "report_multiple_bugs": False,
}

settings.register_profile(
    "dev",
    max_examples=40,
    stateful_step_count=20,
    database=DirectoryBasedExampleDatabase(EXAMPLE_DB),
    **_COMMON,  # type: ignore[arg-type]
)
settings.register_profile(
    "ci",
    max_examples=250,
    stateful_step_count=20,
    derandomize=True,
    database=None,
    **_COMMON,  # type: ignore[arg-type]
)
settings.register_profile(
    "nightly",
    max_examples=2_000,
    stateful_step_count=40,
    database=DirectoryBasedExampleDatabase(os.environ.get("PROPERTIES_EXAMPLE_DB", EXAMPLE_DB)),
    **_COMMON,  # type: ignore[arg-type]
)


def active_profile() -> str:
    """The profile this run uses: ``HYPOTHESIS_PROFILE``, else ``ci`` under CI, else ``dev``."""
    name = os.environ.get("HYPOTHESIS_PROFILE")
    if name:
        if name not in PROFILES:
            raise ValueError(
                f"HYPOTHESIS_PROFILE={name!r} is not a profile of the property suite; "
                f"use one of {', '.join(PROFILES)}"
            )
        return name
    return "ci" if os.environ.get("CI", "").lower() == "true" else "dev"


def profile_settings(name: str | None = None, **overrides: object) -> settings:
    """The settings of profile ``name`` (default: the active one), with overrides."""
    return settings(settings.get_profile(name or active_profile()), **overrides)  # type: ignore[arg-type]
