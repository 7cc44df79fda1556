"""A server this process started and that stopped leaves no warning behind at exit."""

from __future__ import annotations

import subprocess
import sys

CHILD = """
import os, subprocess, sys
from agent_runtime.localpg import pgprocess
child = subprocess.Popen([sys.executable, "-c", "pass"])
pgprocess.adopt_child(child)
os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOWAIT)  # it has ended; nobody reaped it
"""


def test_an_adopted_server_that_ended_is_reaped_at_exit_without_a_warning() -> None:
    done = subprocess.run(
        [sys.executable, "-W", "always", "-c", CHILD],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert "is still running" not in done.stderr, done.stderr
