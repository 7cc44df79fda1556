"""What ``Worker.run`` returned, and the check that it tells the run as the journal has it.

The in-process runner's workers are threads, so each pilot keeps the
:class:`~agent_runtime.loop.outcome.Outcome` its worker's ``run`` returned
(``ThreadPilot.outcome``): a run driven to done (``_drive``), or one the worker found done
already (``already_done``: a restart after the run finished, which the machine draws).

**outcome** (teardown, in-process runner): every returned outcome names its run, says
``done``, and matches the journal: the run is done, with the outcome's output, and
``steps`` is the number of its resolved calls (a done run has one for every decision before
its final answer, a refused one too, so both paths count alike). Without it the outcome of
a run found done was compared with nothing (``already_done`` counting each call twice, or
none, passed the whole suite: seed-41 and seed-43 samples,
docs/mutation-report-2026-12-04-seed43.md). That the outcome is of its public type
(frozen, keyword-only) is judged where the pilot receives it, in both runners
(:mod:`.handback`).
"""

from __future__ import annotations

from agent_runtime.loop.outcome import Outcome

from .observe import Snapshot
from .violations import Violation

RESOLVED = ("confirmed", "failed")  # ToolCall.confirmed: nothing in doubt


def outcome_truth(now: Snapshot, returned: list[tuple[str, str, Outcome]]) -> list[Violation]:
    """**outcome**: ``returned`` is (worker label, run, outcome) of every worker that
    returned one (see the module's doc)."""
    found: list[Violation] = []
    for label, run, outcome in returned:
        row = now.runs.get(run)
        wrong: list[str] = []
        if outcome.run_id != run or outcome.status != "done":
            wrong.append(f"run_id={outcome.run_id!r} status={outcome.status!r}")
        if row is None or row.status != "done":
            wrong.append(f"the run is {'missing' if row is None else row.status}")
        else:
            steps = sum(1 for c in now.calls.get(run, {}).values() if c.state in RESOLVED)
            if outcome.steps != steps:
                wrong.append(f"steps={outcome.steps}, the journal {steps} resolved calls")
            if outcome.output != row.output:
                wrong.append(f"output={outcome.output!r:.80}, the run {row.output!r:.80}")
        if wrong:
            found.append(Violation("outcome", run, None, f"{label} returned {'; '.join(wrong)}"))
    return found
