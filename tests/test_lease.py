"""Who may take a run over: a dead owner is proved dead, never guessed."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

import pytest

from agent_runtime.loop.lease import owner_is_dead, owner_token


def test_a_live_process_is_not_dead() -> None:
    with subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"]) as proc:
        try:
            assert not owner_is_dead(owner_token(proc.pid))
        finally:
            proc.kill()


def test_a_token_made_without_a_pid_names_this_process_and_is_never_dead_here() -> None:
    """A worker's own token (``owner_token()``): its pid is this process's, and the
    process that asks is alive, so nothing proves it dead."""
    token = owner_token()
    assert token.split(":")[1] == str(os.getpid())
    assert not owner_is_dead(token)
    assert owner_token() != token  # a nonce of its own each time


def _reaped_pid() -> int:
    """The pid of a process that exited and was reaped: certainly dead on this host."""
    with subprocess.Popen([sys.executable, "-c", "pass"]) as child:
        child.wait()
    return child.pid


def test_an_exited_and_reaped_process_is_dead() -> None:
    assert owner_is_dead(owner_token(_reaped_pid()))


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
    pid = _reaped_pid()
    assert owner_is_dead(f"{socket.gethostname()}:{pid}:abcd1234")  # dead here...
    # ...but the same pid on another host says nothing about that host's process.
    assert not owner_is_dead(f"some-other-host:{pid}:abcd1234")


@pytest.mark.parametrize(
    "owner",
    [None, "", socket.gethostname(), f"{socket.gethostname()}:notapid:abcd1234"],
    ids=["none", "empty", "no-pid", "pid-not-a-number"],
)
def test_an_owner_token_that_names_no_pid_is_never_presumed_dead(owner: str | None) -> None:
    assert not owner_is_dead(owner)
