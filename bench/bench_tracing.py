"""A step's cost with the ``otel`` extra absent, against the runtime without the hooks.

    python bench/bench_tracing.py [--steps 30] [--runs 5] [--reps 5] [--baseline main]

The loop now enters a few observability hooks per step (``agent_runtime.observe``: a step,
its phases, the model call). Without ``opentelemetry-api`` and with metrics off, each is
meant to cost a function call and a global's check: nothing a step could feel. This
measures it, on one PostgreSQL server (fsync on), with two runtimes in processes of their
own, alternating:

- **hooks, extra absent**: this tree, with ``opentelemetry`` made unimportable in the
  process (``sys.modules["opentelemetry"] = None``: the import guard takes the no-op
  path, whatever the virtualenv holds) and metrics never enabled;
- **no hooks**: the ``--baseline`` revision (default ``main``), exported with ``git
  archive``, which has no hooks at all.

Each process drives the bench agent of ``bench/_loop.py`` (keyed steps to the in-process
mock cloud, a Chat Completions model in-process) after one warm-up run: ``--runs`` runs of
``--steps`` steps and as many of none, alternating; its cost per step is (median long run -
median empty run) / steps. Each rep runs both processes (their order alternates) and its
ratios are hooks / no hooks, of the wall time and of the client's CPU time per step (the
hooks cost CPU only; the wall time of a durable step is mostly the disk's flush, which on
a shared machine drifts). The hooks process also times the hooks of one step alone, in a
loop of 100,000 (the no-op path: a step, four phases, a model call), as a share of a
step's client CPU. Medians and spreads are printed: a ratio within the reps' spread of
1.00 is "unchanged within noise". Figures, never pass/fail.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
# Run in each child: the extra made absent before anything imports agent_runtime.
CHILD = (
    "import runpy, sys\n"
    "sys.modules['opentelemetry'] = None\n"
    "sys.argv[0] = {path!r}\n"
    "runpy.run_path({path!r}, run_name='__main__')\n"
)


def child(steps: int, runs: int) -> None:
    """One process's cost per step, printed as JSON."""
    sys.path.insert(0, str(HERE))
    from _loop import LoopRuns
    from _setup import scratch

    try:
        from agent_runtime.observe import tracing

        hooks = "no-op" if tracing._api is None else "api"
    except ImportError:
        hooks = "none"
    url = os.environ["DATABASE_URL"]
    tag = f"{os.getpid()}"
    with scratch() as state:
        loop = LoopRuns(url, state)
        try:
            loop.run(f"warm-{tag}", steps)
            long: list[tuple[float, float]] = []
            empty: list[tuple[float, float]] = []
            for i in range(2 * runs):
                n = steps if (i % 4) in (0, 3) else 0  # N 0 0 N N 0 0 N ...
                wall, cpu = time.perf_counter(), time.process_time()
                loop.run(f"r-{tag}-{i}", n)
                took = (time.perf_counter() - wall, time.process_time() - cpu)
                (long if n else empty).append(took)
        finally:
            loop.close()

    def per_step(i: int) -> float:
        median = statistics.median
        return (median(t[i] for t in long) - median(t[i] for t in empty)) / steps

    result = {"step": per_step(0), "cpu": per_step(1), "hooks": hooks}
    if hooks != "none":
        result["hook_seconds"] = hooks_alone()
    print(json.dumps(result))


def hooks_alone(rounds: int = 100_000) -> float:
    """Seconds the hooks of one keyed step take on their own, as the loop enters them: the
    step, its four phases (with the attributes set as they are known), the model call."""
    from agent_runtime.observe import tracing
    from agent_runtime.observe.steps import ModelCall, Step
    from agent_runtime.store.records import Lease

    lease = Lease(run_id="bench", owner="o", generation=1)
    start = time.perf_counter()
    for seq in range(rounds):
        with Step(lease, seq, replayed=False):
            with tracing.span("decide", "bench", seq), ModelCall():
                pass
            with tracing.span("intent", "bench", seq, effect="keyed") as span:
                span.set("key", "bench:0")
            with tracing.span(
                "call", "bench", seq, key="bench:0", effect="keyed", tool="tick"
            ) as span:
                span.set("remote_status", "created")
            with tracing.span(
                "confirm", "bench", seq, key="bench:0", effect="keyed",
                remote_status="created", state="confirmed",
            ):  # fmt: skip
                pass
    return (time.perf_counter() - start) / rounds


def export(revision: str, into: Path) -> Path:
    """The baseline's ``src`` and ``mock`` under ``into``; the PYTHONPATH that finds them."""
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", "--format=tar", revision, "src", "mock"],
        check=True,
        capture_output=True,
    ).stdout
    tar = into / "baseline.tar"
    tar.write_bytes(archive)
    with tarfile.open(tar) as opened:
        opened.extractall(into, filter="data")
    return into


def measure(url: str, steps: int, runs: int, pythonpath: str | None) -> dict[str, Any]:
    env = {**os.environ, "DATABASE_URL": url}
    if pythonpath is not None:
        env["PYTHONPATH"] = pythonpath
    code = CHILD.format(path=str(Path(__file__).resolve()))
    out = subprocess.run(
        [sys.executable, "-c", code, "--child", "--steps", str(steps), "--runs", str(runs)],
        env=env,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    result: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--baseline", default="main", help="a git revision without the hooks")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.steps, args.runs)
        return
    sys.path.insert(0, str(HERE))
    from _setup import database, fresh_journal

    with tempfile.TemporaryDirectory(prefix="bench-tracing-") as tmp, database() as url:
        base = export(args.baseline, Path(tmp))
        baseline_path = os.pathsep.join([str(base / "src"), str(base / "mock")])
        here_path = os.pathsep.join([str(ROOT / "src"), str(ROOT / "mock")])
        print(f"steps={args.steps} runs={args.runs} reps={args.reps} baseline={args.baseline}")
        ratios: list[float] = []
        cpu_ratios: list[float] = []
        alone: list[float] = []
        for rep in range(args.reps):
            fresh_journal(url)
            order = [("hooks", here_path), ("none", baseline_path)]
            if rep % 2:
                order.reverse()
            got = {name: measure(url, args.steps, args.runs, path) for name, path in order}
            hooks, none = got["hooks"], got["none"]
            assert hooks["hooks"] == "no-op" and none["hooks"] == "none", got
            ratios.append(hooks["step"] / none["step"])
            cpu_ratios.append(hooks["cpu"] / none["cpu"])
            alone.append(hooks["hook_seconds"] / none["cpu"])
            print(
                f"rep {rep}: wall ms/step hooks {hooks['step'] * 1e3:.3f} none "
                f"{none['step'] * 1e3:.3f} ratio {ratios[-1]:.3f}; client CPU ms/step hooks "
                f"{hooks['cpu'] * 1e3:.3f} none {none['cpu'] * 1e3:.3f} ratio "
                f"{cpu_ratios[-1]:.3f}; the hooks alone {hooks['hook_seconds'] * 1e6:.2f} us"
            )
        for name, got in (
            ("wall ratio (hooks, extra absent / no hooks)", ratios),
            ("client CPU ratio (hooks, extra absent / no hooks)", cpu_ratios),
            ("the hooks alone / a step's client CPU", alone),
        ):
            print(
                f"{name}: median {statistics.median(got):.4f} "
                f"(min {min(got):.4f}, max {max(got):.4f}) over {len(got)} reps"
            )


if __name__ == "__main__":
    main()
