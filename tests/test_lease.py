"""Who may take a run over: a dead owner is proved dead, never guessed."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

from agent_runtime.lease import owner_is_dead, owner_token


def test_a_live_process_is_not_dead() -> None:
    with subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"]) as proc:
        try:
            assert not owner_is_dead(owner_token(proc.pid))
        finally:
            proc.kill()


def test_an_exited_and_reaped_process_is_dead() -> None:
    proc = subprocess.run([sys.executable, "-c", "pass"], check=True)
    assert proc.returncode == 0
    with subprocess.Popen([sys.executable, "-c", "pass"]) as child:
        child.wait()
        assert owner_is_dead(owner_token(child.pid))


def test_a_killed_process_nobody_reaped_yet_is_dead() -> None:
    with subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"]) as child:
        child.kill()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:  # wait for the kill to land, without reaping
            with open(f"/proc/{child.pid}/stat") as stat:
                if stat.read().rsplit(")", 1)[1].split()[0] == "Z":
                    break
            time.sleep(0.01)
        assert os.path.exists(f"/proc/{child.pid}")  # still a zombie: kill(pid, 0) succeeds
        assert owner_is_dead(owner_token(child.pid))


def test_an_owner_on_another_host_is_never_presumed_dead() -> None:
    assert not owner_is_dead("some-other-host:1:abcd1234")
    assert not owner_is_dead(f"{socket.gethostname()}:notapid:abcd1234")
    assert not owner_is_dead(None)
    assert not owner_is_dead("supervisor-token-without-pid")
