"""What the per-start timeout costs conform: bench_conform's subject three ways, in one run.

    python bench/bench_watchdog.py [INPUTS] [--rounds N]

``inline``: ``timeout=None``, every start on the calling thread, no watchdog (what conform
cost before the watchdog came in). ``handover``: each start handed to a start thread and
waited for (``SerialExecutor`` over ``InProcessRunner``, the watchdog as it was).
``watched``: the loop on a start thread, the caller only watching deadlines (``_watched``,
what conform does now). The rounds interleave the three; each figure is the best round, and
the ratios to ``inline`` are what to compare across machines. Prints, asserts nothing.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from bench_conform import Agent
from crashresume import Context, conform
from crashresume import _conform as conform_module
from crashresume._plan import SerialExecutor
from crashresume._watched import WatchedExecutor

DEFAULT_INPUTS = 500  # inputs, one effect each: 1,000 crash scenarios, 2,000 lives
DEFAULT_ROUNDS = 5
TIMEOUT = 120.0  # seconds: the default per-start timeout

WAYS: dict[str, tuple[Any, float | None]] = {
    "inline": (SerialExecutor, None),
    "handover": (SerialExecutor, TIMEOUT),
    "watched": (WatchedExecutor, TIMEOUT),
}


def once(inputs: int, executor: Any, timeout: float | None) -> float:
    stores: dict[str, set[str]] = {}

    def make_agent(ctx: Context) -> Agent:
        return Agent(ctx, stores.setdefault(ctx.run_id, set()))

    conform_module.WatchedExecutor = executor  # type: ignore[attr-defined]
    try:
        started = time.perf_counter()
        conform(make_agent, inputs=[f"job-{i}" for i in range(inputs)], timeout=timeout)
        return time.perf_counter() - started
    finally:
        conform_module.WatchedExecutor = WatchedExecutor  # type: ignore[attr-defined]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("inputs", type=int, nargs="?", default=DEFAULT_INPUTS)
    parser.add_argument("--rounds", type=int, default=DEFAULT_ROUNDS)
    options = parser.parse_args()
    best = {name: float("inf") for name in WAYS}
    for _ in range(options.rounds):
        for name, (executor, timeout) in WAYS.items():
            best[name] = min(best[name], once(options.inputs, executor, timeout))
    for name, elapsed in best.items():
        print(
            f"{name:9} {options.inputs} inputs, {2 * options.inputs} scenarios: "
            f"{elapsed:.2f} s, {elapsed / best['inline']:.2f} x inline"
        )


if __name__ == "__main__":
    main()
