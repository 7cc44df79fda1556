"""The operator's commands as real processes: ``python -m agent_runtime ARGS``, and what
the operator tests share.

`cli` runs one command against a database and keeps its exit code and output (`Out`);
`one_error_line` reads the one error line of a failed command. `claimed` makes a run held
by an owner; `ELSEWHERE` is an owner on another host (never provably dead, so only the
clock frees its run); `SVG` is the namespace of the timeline pictures.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from typing import Any

from agent_runtime.store.journal import Journal
from agent_runtime.store.records import Lease

SVG = "{http://www.w3.org/2000/svg}"
CLI_TIMEOUT = 60  # seconds one operator command may take
ELSEWHERE = "another-host:4242:cafe0001"  # an owner on another host: never provably dead


@dataclass(frozen=True)
class Out:
    """One command's exit code and output."""

    code: int
    stdout: str
    stderr: str

    def json(self) -> Any:
        return json.loads(self.stdout)


def cli(database_url: str, *args: str, **env: str) -> Out:
    """``python -m agent_runtime ARGS`` as a real process against ``database_url``."""
    full = {k: v for k, v in os.environ.items() if k not in ("CRASH_AT", "CRASH_SEQ", "RUN_ID")}
    full.update(DATABASE_URL=database_url, **env)
    proc = subprocess.run(
        [sys.executable, "-m", "agent_runtime", *args],
        env=full,
        capture_output=True,
        text=True,
        timeout=CLI_TIMEOUT,
    )
    return Out(proc.returncode, proc.stdout, proc.stderr)


def claimed(journal: Journal, run_id: str, owner: str) -> Lease:
    """A new run ``run_id``, claimed by ``owner`` for 12 seconds."""
    journal.create_run(run_id)
    lease = journal.claim(run_id, owner, 12.0)
    assert lease is not None
    return lease


def one_error_line(out: Out, kind: str) -> str:
    """The one ``ERROR <kind>`` line a failed command wrote, and nothing on stdout."""
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr
    assert lines[0].startswith(f"ERROR {kind} error="), lines[0]
    assert out.stdout == ""
    return lines[0]
