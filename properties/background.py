"""The ``ci`` exploration, and the broken runtimes' explorations, in a process of their own
on the machine's other core.

The exploration (the small scope, then the machine: :func:`properties.exploring.explore`)
is the suite's longest test by far, the variants' (``test_variants.py``: one per broken
runtime) the next; none needs anything of the others. When the session selects tests that
read them under the ``ci`` profile, the conftest starts ``python -m properties.background``
with the suite's first test, on a suite database of its own: the ``ci`` exploration first,
then each selected variant's, each result written as JSON as it ends. The tests that read
the ``ci`` one come last; a variant's test waits for its own. Findings are saved as any
other's (a variant's in the results directory), and errors come back as text.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from types import FrameType
from typing import Any, Final

from .driving import Stats
from .events import Schedule
from .exploring import Exploration, explore
from .machine import FAILURES
from .profiles import PROFILES
from .runners import InProcessRunner
from .server import SuiteDatabase
from .variants import VARIANTS

ROOT: Final = Path(__file__).resolve().parents[1]
GRACE: Final = 30.0  # seconds a stopped exploration has to close its database
MAIN: Final = "ci.json"  # the ci exploration's result in the results directory
POLL: Final = 0.05  # seconds between two looks for a result


class BackgroundFinding(AssertionError):
    """The exploration's error, as its process said it (``kind``: its exception's class)."""

    def __init__(self, kind: str, text: str) -> None:
        super().__init__(text)
        self.kind = kind


def to_json(result: Exploration) -> dict[str, Any]:
    error = result.error
    return {
        "profile": result.profile,
        "seed": result.seed,
        "elapsed": result.elapsed,
        "stats": dataclasses.asdict(result.stats),
        "error": None if error is None else {"kind": type(error).__name__, "text": str(error)},
        "saved": [str(path) for path, _ in result.saved],
        "found_after": result.found_after,
        "scope_tried": result.scope_tried,
    }


def from_json(obj: dict[str, Any]) -> Exploration:
    error = obj["error"]
    saved = [Path(p) for p in obj["saved"]]
    return Exploration(
        profile=obj["profile"],
        seed=obj["seed"],
        elapsed=obj["elapsed"],
        stats=Stats(**obj["stats"]),
        error=None if error is None else BackgroundFinding(error["kind"], error["text"]),
        saved=[(path, Schedule.load(path)) for path in saved],
        found_after=obj["found_after"],
        scope_tried=obj["scope_tried"],
    )


class Background:
    """The explorations running in their own process: the ``ci`` one (``main``), then each
    of ``variants`` on its broken runtime; :meth:`result` and :meth:`variant` wait for
    theirs (each is written as it ends)."""

    def __init__(
        self, profile: str, name: str, *, main: bool = True, variants: Sequence[str] = ()
    ) -> None:
        self.directory = Path(tempfile.mkdtemp(prefix="crashresume-exploration-"))
        self.log = self.directory / "exploration.log"
        self.variants = tuple(variants)
        command = [sys.executable, "-m", "properties.background", "--out", str(self.directory)]
        command += ["--profile", profile, "--name", name, "--variants", *self.variants]
        path = os.environ.get("PYTHONPATH", "")
        with self.log.open("wb") as log:
            self.process = subprocess.Popen(
                [*command, *(() if main else ("--no-main",))],
                cwd=ROOT,
                stdout=log,
                stderr=subprocess.STDOUT,
                env={**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, (str(ROOT), path)))},
            )

    def result(self) -> Exploration:
        """The ``ci`` exploration's (what it printed is printed here)."""
        found = self._wait_for(self.directory / MAIN)
        said = self.log.read_text("utf-8", errors="replace")
        if said.strip():
            print(said, end="")
        return found

    def variant(self, variant: str) -> Exploration | None:
        """The exploration of ``variant``'s broken runtime, if this one runs it."""
        if variant not in self.variants:
            return None
        return self._wait_for(self.directory / f"variant-{variant}.json")

    def _wait_for(self, path: Path) -> Exploration:
        while not path.exists() and self.process.poll() is None:
            time.sleep(POLL)
        if not path.exists():
            said = self.log.read_text("utf-8", errors="replace")
            tail = "\n".join(said.splitlines()[-30:])
            code = self.process.wait()
            raise RuntimeError(f"the background exploration exited {code}:\n{tail}")
        return from_json(json.loads(path.read_text("utf-8")))

    def stop(self) -> None:
        """Stop it if it still runs (its database is closed on the way out), and forget it."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(GRACE)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        shutil.rmtree(self.directory, ignore_errors=True)


def _terminated(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(128 + signum)  # through the finally blocks: the database is closed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m properties.background")
    parser.add_argument("--out", type=Path, required=True, help="a directory for the results")
    parser.add_argument("--profile", default="ci", choices=PROFILES)
    parser.add_argument("--name", default="ci")
    parser.add_argument("--no-main", action="store_true", help="the variants only")
    parser.add_argument("--variants", nargs="*", default=[], choices=sorted(VARIANTS))
    args = parser.parse_args(argv)
    logging.getLogger("agent_runtime").setLevel(logging.CRITICAL)  # fences warn by the 1000
    signal.signal(signal.SIGTERM, _terminated)
    # a stop while the server starts waits until it can be closed again
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
    database = SuiteDatabase()
    try:
        print(f"database {database.cluster.datadir}", flush=True)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})
        jobs = [] if args.no_main else [(None, args.name, args.out / MAIN)]
        jobs += [(v, v, args.out / f"variant-{v}.json") for v in args.variants]
        for variant, name, out in jobs:
            runner = InProcessRunner(database.url, variant=variant, server=database)
            try:
                failures = args.out / "failures" if variant else FAILURES
                result = explore(runner, profile=args.profile, name=name, failures_dir=failures)
            finally:
                runner.close()
            written = out.with_suffix(".part")
            written.write_text(json.dumps(to_json(result)), encoding="utf-8")
            written.replace(out)  # whole, or not there: a reader polls for it
    finally:
        database.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
