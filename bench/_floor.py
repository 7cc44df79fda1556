"""The journal's share of a step: its writes alone, on one connection, nothing else.

A journaled step of ``bench_step.py`` is the worker's whole loop: the ownership check,
the model's exchange, the decision, the intent, the tool's exchange, the confirm. This
subject sends only the four journal statements of such a step, through the runtime's own
:class:`~agent_runtime.store.journal.Journal` and with rows of the same size (the loop model's
answer, the mock cloud's record), and no HTTP, model, tool or worker at all. So its ratio
to a raw commit is a floor: what any step of this protocol costs on this server and client
before anything else is added, and what is left of a step beyond it is the exchanges, the
mocks and the worker's own code.

Runs of N steps minus runs of none, like the other subjects: create, claim, the final
answer and finish cancel.
"""

from __future__ import annotations

from typing import Any

from _loop import USAGE, answer, task
from agent_runtime import Journal
from agent_runtime.store import db

OWNER = "bench.floor"


def _record(seq: int) -> dict[str, Any]:
    """What the keyed tick journals for step ``seq``: the mock cloud's DNS record, less
    the status the tool returns apart."""
    return {
        "id": f"dns-{seq + 1:07d}",
        "kind": "dns_record",
        "name": f"tick-{seq}.bench.test",
        "type": "A",
        "value": "10.0.0.1",
    }


class JournalSteps:
    """Runs of journal writes only, on a connection of their own."""

    def __init__(self, url: str) -> None:
        self.conn = db.connect(url, application_name=OWNER)
        db.ensure_schema(self.conn)
        self.journal = Journal(self.conn)
        self.runs = 0

    def run(self, steps: int) -> None:
        """One run of ``steps`` journaled steps, then its final answer and finish."""
        journal = self.journal
        run_id = f"floor-{self.runs}"
        self.runs += 1
        journal.create_run(run_id, agent="bench-loop", input=task(steps))
        lease = journal.claim(run_id, OWNER, 60.0)
        if lease is None:
            raise SystemExit(f"could not claim {run_id}")
        for seq in range(steps):
            journal.check_owner(lease, "model call")
            journal.record_answer(
                lease,
                seq,
                [("tick", {"n": seq}, f"call_{seq}")],
                message=answer(seq, steps),
                usage=USAGE,
            )
            call = journal.record_intent(lease, seq)
            journal.record_confirm(lease, call, _record(seq), "created")
        journal.check_owner(lease, "model call")
        final = answer(steps, steps)
        journal.record_answer(lease, steps, [("done", {}, None)], message=final, usage=USAGE)
        journal.finish(lease, final["content"])

    def close(self) -> None:
        self.conn.close()
