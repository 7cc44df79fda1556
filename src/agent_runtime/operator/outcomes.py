"""What ``resolve`` (without ``--seq``) and ``retry`` did.

:class:`Resolution`: the stranded intents ``resolve RUN`` re-sent, as the journal has them
now. :class:`Retry`: the run's status after a retry, what it was before, and what may stop it
again. A retry clears a failed run's failure (kept in ``run_retries``) and hands the run to its next
owner, which re-sends every intent left in doubt. When the cleared failure names one of those
keys, the run stopped on that call: :attr:`Retry.failed_on` names it, and ``retry`` says how
to get past it if the remote refuses it again (``resolve RUN --seq N --confirm JSON |
--fail`` on the failed run, then retry).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .views import PastRetry, Step, iso


@dataclass(frozen=True, kw_only=True)
class Retry:
    """What ``retry`` did: the run's status now, and what it was before."""

    run_id: str
    status: str  # pending (it was failed), or the free run's own status
    past: PastRetry
    in_doubt: list[str]  # keys of intents without a confirm: the next owner re-sends them

    @property
    def failed_on(self) -> str | None:
        """The key in doubt the cleared failure names: the call the run stopped on, which
        its next owner sends again (and which may stop it the same way)."""
        failure = self.past.previous_failure or ""
        return next((k for k in self.in_doubt if f"key={k}" in failure), None)

    def to_json(self) -> dict[str, Any]:
        return {
            "run": self.run_id,
            "status": self.status,
            **self.past.to_json(),
            "in_doubt": self.in_doubt,
            "failed_on": self.failed_on,
        }


@dataclass(frozen=True, kw_only=True)
class Resolution:
    run_id: str
    resolved: list[Step]  # the steps that were in doubt, as the journal has them now
    in_doubt: list[str]  # verdicts still standing afterwards

    def to_json(self) -> dict[str, Any]:
        return {
            "run": self.run_id,
            "resolved": [
                {
                    "seq": s.seq,
                    "key": s.key,
                    "result_id": s.result_id,
                    "remote_status": s.remote_status,
                    "confirmed_at": iso(s.confirmed_at),
                    "confirmed_by": s.confirmed_by,
                }
                for s in self.resolved
            ],
            "in_doubt": self.in_doubt,
        }
