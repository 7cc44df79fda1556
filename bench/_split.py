"""Where the state machine's time goes: applying events, checking them, settling runs.

:class:`Split` wraps one runner's ``apply``, ``check`` and ``settle`` (on the instance,
so the suite's code is untouched) and adds up their wall seconds, ``apply``'s per event
op. What applying costs is the runtime's own work plus the runner's steering (a start
claims, adopts and drives a worker to its first gate through the real database and mocks;
a database crash restarts the server); so ``events / apply seconds`` is a ceiling: the
events/s the machine would reach if checks, settles, resets and Hypothesis cost nothing.
"""

from __future__ import annotations

import time
from typing import Any

from properties.events import Event
from properties.runner import ScheduleRunner


class Split:
    """Wall seconds inside a runner's apply (per op), check and settle, from now on."""

    def __init__(self, runner: ScheduleRunner) -> None:
        self.by_op: dict[str, float] = {}
        self.events_by_op: dict[str, int] = {}
        self.check = 0.0
        self.settle = 0.0
        apply, check, settle = runner.apply, runner.check, runner.settle

        def timed_apply(event: Event) -> str:
            began = time.perf_counter()
            try:
                return apply(event)
            finally:
                spent = time.perf_counter() - began
                self.by_op[event.op] = self.by_op.get(event.op, 0.0) + spent
                self.events_by_op[event.op] = self.events_by_op.get(event.op, 0) + 1

        def timed_check() -> None:
            began = time.perf_counter()
            try:
                check()
            finally:
                self.check += time.perf_counter() - began

        def timed_settle() -> None:  # less the checks it makes, counted as checks
            began, checked = time.perf_counter(), self.check
            try:
                settle()
            finally:
                self.settle += time.perf_counter() - began - (self.check - checked)

        runner.apply = timed_apply  # type: ignore[method-assign]
        runner.check = timed_check  # type: ignore[method-assign]
        runner.settle = timed_settle  # type: ignore[method-assign]

    def figures(self, seconds: float) -> dict[str, Any]:
        """The split of ``seconds`` of machine time, and the apply-only ceiling."""
        applying = sum(self.by_op.values())
        events = sum(self.events_by_op.values())
        slowest = sorted(self.by_op, key=lambda op: -self.by_op[op])[:5]
        return {
            "apply_share": round(applying / seconds, 3),
            "check_share": round(self.check / seconds, 3),
            "settle_share": round(self.settle / seconds, 3),
            "apply_ms_per_event": round(1000 * applying / events, 2) if events else 0.0,
            "apply_only_events_per_s": round(events / applying, 1) if applying else 0.0,
            "slowest_ops_ms": {
                op: round(1000 * self.by_op[op] / self.events_by_op[op], 2) for op in slowest
            },
        }


def split_line(f: dict[str, Any]) -> str:
    """Two lines for :meth:`Split.figures`' figures."""
    slowest = ", ".join(f"{op} {ms} ms" for op, ms in f["slowest_ops_ms"].items())
    rest = 1 - f["apply_share"] - f["check_share"] - f["settle_share"]
    return (
        f"  the machine's time: applying events {f['apply_share']:.0%} "
        f"({f['apply_ms_per_event']} ms an event), checking them "
        f"{f['check_share']:.0%}, settling runs {f['settle_share']:.0%}, the rest "
        f"(Hypothesis, resets) {rest:.0%}; applying alone caps the machine at "
        f"{f['apply_only_events_per_s']} events/s\n"
        f"  the ops that took most of it (ms an event of each): {slowest}"
    )
