"""**shown**: what the runtime's own reads of a run show is the journal (in-process teardown).

Two reads outside the protocol stand between the journal and a person: ``show`` reads a
run's decisions with ``load_decisions`` (:func:`~agent_runtime.operator.snapshot.read_history`),
and ``conform`` judges the runtime by the confirmed steps ``confirmed_steps_under`` lists for
a scenario's runs (:mod:`agent_runtime.conformance`). No check compared either with the
journal, so each could list another run's rows, or the calls still in doubt, and pass the
suite. At each example's end, for the run ``SHOWN`` (the second: schedules that run more
than one run start it, and most start r0 first), both reads are held to the suite's own
snapshot: its decisions by step, tool and arguments; and the confirmed steps of every run
and of that run alone, in run and step order, with the tool and arguments their decisions
named. Three statements: the teardown stays cheap (the grid replays 701 schedules).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from agent_runtime.store import db

from .observe import Snapshot
from .violations import Violation

SHOWN: Final = "r1"


def shown_truth(conn: db.Connection, now: Snapshot) -> list[Violation]:
    """**shown**: see the module's doc."""
    found: list[Violation] = []
    decided = now.decisions.get(SHOWN, {})
    journal = [(d.seq, d.tool, d.args) for _, d in sorted(decided.items())]
    listed = [
        (r["seq"], r["tool"], r["args"]) for r in db.run(conn, "load_decisions", {"run": SHOWN})
    ]
    if listed != journal:
        found.append(
            Violation(
                "shown",
                SHOWN,
                None,
                f"show's decisions are {_cut(listed)}, the journal's {_cut(journal)}",
            )
        )
    for prefix in ("r", SHOWN):  # every run's (the suite's ids), then one run's alone
        confirmed = [
            (run, now.decisions[run][seq].tool, now.decisions[run][seq].args)
            for run in sorted(now.calls)
            if run.startswith(prefix)
            for seq, call in sorted(now.calls[run].items())
            if call.state == "confirmed" and seq in now.decisions.get(run, {})
        ]
        steps = db.run(conn, "confirmed_steps_under", {"prefix": prefix})
        judged = [(r["run_id"], r["tool"], r["args"]) for r in steps]
        if judged != confirmed:
            found.append(
                Violation(
                    "shown",
                    None if prefix == "r" else SHOWN,
                    None,
                    f"conform's confirmed steps under {prefix!r} are {_cut(judged)}, the "
                    f"journal's {_cut(confirmed)}",
                )
            )
    return found


def _cut(rows: Sequence[tuple[object, ...]]) -> str:
    text = repr(rows)
    return text if len(text) <= 300 else text[:300] + "...[cut]"
