"""The journal's share of a step: its writes alone, on one connection, nothing else.

A journaled step of ``bench_step.py`` is the worker's whole loop: the ownership check,
the model's exchange, the decision, the intent, the tool's exchange, the confirm. This
subject sends only the four journal statements of such a step, through the runtime's own
:class:`~agent_runtime.journal.Journal` and with rows of the same size (the loop model's
answer, the mock cloud's record), and no HTTP, model, tool or worker at all. So its ratio
to a raw commit is a floor: what any step of this protocol costs on this server and client
before anything else is added, and what is left of a step beyond it is the exchanges, the
mocks and the worker's own code.

Runs of N steps minus runs of none, like the other subjects: create, claim, the final
answer and finish cancel.
"""

from __future__ import annotations

import json
from typing import Any

from _loop import MODEL
from agent_runtime import Journal, db

OWNER = "bench.floor"


def _answer(seq: int) -> dict[str, Any]:
    """The assistant message the loop model gives for step ``seq``."""
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": f"call_{seq}",
                "type": "function",
                "function": {"name": "tick", "arguments": json.dumps({"n": seq})},
            }
        ],
    }


def _record(seq: int) -> dict[str, Any]:
    """What the mock cloud answers for tick ``seq`` (its DNS record)."""
    return {
        "id": f"dns-{seq:08x}",
        "name": f"tick-{seq}.bench.test",
        "type": "A",
        "value": "10.0.0.1",
        "idempotency_key": f"floor:{seq}",
    }


USAGE = {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}


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
        journal.create_run(run_id, agent="bench-loop", input=f"{MODEL}: {steps} steps")
        lease = journal.claim(run_id, OWNER, 60.0)
        if lease is None:
            raise SystemExit(f"could not claim {run_id}")
        for seq in range(steps):
            journal.check_owner(lease, "model call")
            journal.record_answer(
                lease,
                seq,
                [("tick", {"n": seq}, f"call_{seq}")],
                message=_answer(seq),
                usage=USAGE,
            )
            call = journal.record_intent(lease, seq)
            journal.record_confirm(lease, call, _record(seq), "created")
        journal.check_owner(lease, "model call")
        final = {"role": "assistant", "content": f"ticked {steps} times"}
        journal.record_answer(lease, steps, [("done", {}, None)], message=final, usage=USAGE)
        journal.finish(lease, final["content"])

    def close(self) -> None:
        self.conn.close()
