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
ratio is hooks / no hooks; the median ratio and the spread are printed. A ratio within the
reps' spread of 1.00 is "unchanged within noise". Figures, never pass/fail.
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
    import agent_runtime
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
            long: list[float] = []
            empty: list[float] = []
            for i in range(2 * runs):
                n = steps if (i % 4) in (0, 3) else 0  # N 0 0 N N 0 0 N ...
                start = time.perf_counter()
                loop.run(f"r-{tag}-{i}", n)
                (long if n else empty).append(time.perf_counter() - start)
        finally:
            loop.close()
    step = (statistics.median(long) - statistics.median(empty)) / steps
    print(json.dumps({"step": step, "hooks": hooks, "from": agent_runtime.__file__}))


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
        ratios = []
        for rep in range(args.reps):
            fresh_journal(url)
            order = [("hooks", here_path), ("none", baseline_path)]
            if rep % 2:
                order.reverse()
            got = {name: measure(url, args.steps, args.runs, path) for name, path in order}
            hooks, none = got["hooks"], got["none"]
            assert hooks["hooks"] == "no-op" and none["hooks"] == "none", got
            ratio = hooks["step"] / none["step"]
            ratios.append(ratio)
            print(
                f"rep {rep}: hooks (extra absent) {hooks['step'] * 1e3:.3f} ms/step, "
                f"no hooks {none['step'] * 1e3:.3f} ms/step, ratio {ratio:.3f}"
            )
        print(
            f"median ratio {statistics.median(ratios):.3f} "
            f"(min {min(ratios):.3f}, max {max(ratios):.3f}) over {len(ratios)} reps"
        )


if __name__ == "__main__":
    main()
