"""The kinds of finding and the ``Finding`` record itself."""

from __future__ import annotations

import enum
from dataclasses import asdict, dataclass


class FindingKind(enum.StrEnum):
    """What went wrong in a scenario. Each value is also the kind's name in text and JSON."""

    # a logical effect (same name and arg) happened more often than in the baseline
    DUPLICATE_EFFECT = "duplicate_effect"
    # after an injected fault (faults=), the start that met it performed an effect again
    RETRY_DUPLICATED = "retry_duplicated"
    # a rule of expect= or at_most_once= does not hold (under "run": not even without a crash)
    RULE_BROKEN = "rule_broken"
    # a baseline effect happened fewer times than in the baseline (usually: never)
    EFFECT_LOST = "effect_lost"
    # one key was sent again with a different name or arg
    KEY_CONFLICT = "key_conflict"
    # state() was empty right after a restart although work had committed before the crash
    STATE_LOST = "state_lost"
    # the final state() differs from the baseline's
    RESUME_DIVERGED = "resume_diverged"
    # a life of the scenario raised instead of finishing its inputs
    RESUME_CRASHED = "resume_crashed"
    # a start did not finish within conform's timeout, and the harness stopped it
    TIMEOUT = "timeout"
    # the two crash-free baselines differ, so no crash scenario can be judged
    NONDETERMINISTIC_BASELINE = "nondeterministic_baseline"
    # an old start woken after its restart ran acted or wrote anyway (no fencing; _overlap)
    OVERLAP = "overlap"


@dataclass(frozen=True, slots=True, kw_only=True)
class Finding:
    """One thing that went wrong in one scenario, and how to rerun just that scenario."""

    kind: FindingKind
    scenario: str  # the scenario id, e.g. "run-3"; "run" for the baselines
    message: str  # what differed, in one line
    rerun: str  # the Python call that reruns only this scenario
    rerun_cli: str  # the same from the command line
    repeats: str | None = None  # with repeat=N: "3/20", how many repetitions showed it

    def to_dict(self) -> dict[str, str]:
        """The finding as plain JSON-ready data."""
        data = asdict(self)
        data["kind"] = str(self.kind)
        if self.repeats is None:  # repeat=1: the JSON of a finding is what it always was
            del data["repeats"]
        return data
