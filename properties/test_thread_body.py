"""An in-process worker's stand-in never outlives the process that made it, even when the
worker was never ended (its pilot stopped by a signal while it was being made)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

MADE = "from properties.thread_body import Body; print(Body().pid, flush=True)"


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"  # a zombie nobody reaped yet is dead all the same


def test_a_stand_in_left_unended_dies_with_its_process() -> None:
    root = Path(__file__).resolve().parents[1]
    done = subprocess.run(
        [sys.executable, "-c", MADE],
        cwd=root,
        env={**os.environ, "PYTHONPATH": str(root)},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    pid = int(done.stdout.split()[0])
    try:
        assert not _alive(pid), f"stand-in {pid} sleeps on after its process exited"
    finally:
        if _alive(pid):
            os.kill(pid, 9)
