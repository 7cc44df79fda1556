"""The ``ci`` exploration in a process of its own, on the machine's other core.

The exploration (the small scope, then the machine: :func:`properties.exploring.explore`)
is the suite's longest test by far, and it needs nothing of the others. When the session
selects a test that reads it (marked ``ci_exploration``) under the ``ci`` profile, the
conftest starts ``python -m properties.background`` at collection, on a suite database of
its own; the tests that read it come last and wait for its JSON. Its findings are saved
under ``properties/failures/`` as any other's, and its errors come back as text.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from types import FrameType
from typing import Any, Final

from .driving import Stats
from .events import Schedule
from .exploring import Exploration, explore
from .profiles import PROFILES
from .runners import InProcessRunner
from .server import SuiteDatabase

ROOT: Final = Path(__file__).resolve().parents[1]
GRACE: Final = 30.0  # seconds a stopped exploration has to close its database


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
    """One exploration running in its own process; :meth:`result` waits for it."""

    def __init__(self, profile: str, name: str) -> None:
        self.directory = Path(tempfile.mkdtemp(prefix="crashresume-exploration-"))
        self.out = self.directory / "result.json"
        self.log = self.directory / "exploration.log"
        command = [sys.executable, "-m", "properties.background", "--out", str(self.out)]
        path = os.environ.get("PYTHONPATH", "")
        with self.log.open("wb") as log:
            self.process = subprocess.Popen(
                [*command, "--profile", profile, "--name", name],
                cwd=ROOT,
                stdout=log,
                stderr=subprocess.STDOUT,
                env={**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, (str(ROOT), path)))},
            )

    def result(self) -> Exploration:
        code = self.process.wait()
        said = self.log.read_text("utf-8", errors="replace")
        if code != 0 or not self.out.exists():
            tail = "\n".join(said.splitlines()[-30:])
            raise RuntimeError(f"the background exploration exited {code}:\n{tail}")
        if said.strip():
            print(said, end="")
        return from_json(json.loads(self.out.read_text("utf-8")))

    def stop(self) -> None:
        """Stop it if it still runs (its database is closed on the way out), and forget it."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(GRACE)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        for path in (self.out, self.log):
            path.unlink(missing_ok=True)
        self.directory.rmdir()


def _terminated(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(128 + signum)  # through the finally blocks: the database is closed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m properties.background")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--profile", default="ci", choices=PROFILES)
    parser.add_argument("--name", default="ci")
    args = parser.parse_args(argv)
    logging.getLogger("agent_runtime").setLevel(logging.CRITICAL)  # fences warn by the 1000
    signal.signal(signal.SIGTERM, _terminated)
    # a stop while the server starts waits until it can be closed again
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
    database = SuiteDatabase()
    try:
        print(f"database {database.cluster.datadir}", flush=True)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})
        runner = InProcessRunner(database.url, server=database)
        try:
            result = explore(runner, profile=args.profile, name=args.name)
        finally:
            runner.close()
    finally:
        database.close()
    args.out.write_text(json.dumps(to_json(result)), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
