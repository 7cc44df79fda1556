"""How long conform takes over many inputs with a trivial in-memory subject.

    python bench/bench_conform.py [INPUTS] [--crashes N]

A benchmark, not a test: it prints the figure and asserts nothing. With the default plan
(a crash before and after every effect call) n inputs with one effect each make 2n crash
scenarios, each replaying up to n inputs twice: O(n^2) steps and effect calls.
"""

from __future__ import annotations

import argparse
import time

from crashresume import Context, conform

DEFAULT_INPUTS = 1000  # inputs, one effect each


class Agent:
    """Skips what is done, charges under a stable key, records progress after the charge."""

    def __init__(self, ctx: Context, done: set[str]) -> None:
        self.ctx = ctx
        self.done = done

    def step(self, job: str) -> None:
        if job in self.done:
            return
        self.ctx.effect("charge", job, key=job)
        self.done.add(job)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("inputs", type=int, nargs="?", default=DEFAULT_INPUTS)
    parser.add_argument("--crashes", type=int, default=1)
    options = parser.parse_args()
    stores: dict[str, set[str]] = {}

    def make_agent(ctx: Context) -> Agent:
        return Agent(ctx, stores.setdefault(ctx.run_id, set()))

    inputs = [f"job-{i}" for i in range(options.inputs)]
    started = time.perf_counter()
    report = conform(make_agent, inputs=inputs, crashes=options.crashes)
    elapsed = time.perf_counter() - started
    print(
        f"conform: {options.inputs} inputs, {len(report.scenarios)} crash scenarios, "
        f"crashes={options.crashes}, passed={report.passed}: {elapsed:.2f} s "
        f"({elapsed / max(len(report.scenarios), 1) * 1e3:.2f} ms per scenario)"
    )


if __name__ == "__main__":
    main()
