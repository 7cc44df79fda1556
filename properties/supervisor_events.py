"""The pool mode's own events, as the runners without a real supervisor take them.

``sigterm``, ``hangup``, ``stop_supervisor`` and ``rival_sweep`` act on the real
supervisor and its pool workers (:class:`properties.pool_runner.PoolRunner`). The
in-process and process runners mimic the supervisor's claim and have no pool: there these
events are no-ops that say so, which keeps every list of events a valid schedule in every
runner.
"""

from __future__ import annotations

from .events import Event

NO_POOL = "skipped (no supervisor or pool in this runner)"


class NoSupervisor:
    """The four events, skipped."""

    def _on_sigterm(self, e: Event) -> str:
        return NO_POOL

    def _on_hangup(self, e: Event) -> str:
        return NO_POOL

    def _on_stop_supervisor(self, e: Event) -> str:
        return NO_POOL

    def _on_rival_sweep(self, e: Event) -> str:
        return NO_POOL
