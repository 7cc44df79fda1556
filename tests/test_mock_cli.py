"""``python -m mock_remotes`` as a user runs it: readable help, and no server left behind."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from .fix_supervisor import wait_for

STARTING = re.compile(r"mock (cloud|model) starting pid=(\d+) port=(\d+)")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def _listening(port: int) -> bool:
    with socket.socket() as probe:
        probe.settimeout(1.0)
        return probe.connect_ex(("127.0.0.1", port)) == 0


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie waiting to be reaped does not count)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


class MocksProcess:
    """``python -m mock_remotes`` in the foreground, its output read as it comes."""

    def __init__(self, data_dir: Path) -> None:
        self.ports = {"cloud": _free_port(), "model": _free_port()}
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "mock_remotes",
                str(data_dir),
                "--cloud-port",
                str(self.ports["cloud"]),
                "--model-port",
                str(self.ports["model"]),
            ],
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    @property
    def children(self) -> dict[str, int]:
        found = [m for m in map(STARTING.search, list(self.lines)) if m]
        return {m[1]: int(m[2]) for m in found}

    def ready(self) -> bool:
        return any(line.startswith("model http://") for line in self.lines)

    def kill_everything(self) -> None:
        for pid in [*self.children.values(), self.proc.pid]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        self.proc.wait(timeout=30)
        self._reader.join(timeout=5)
        if self.proc.stdout is not None:
            self.proc.stdout.close()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_to_the_foreground_mocks_stops_both_servers_and_frees_their_ports(
    sig: signal.Signals, tmp_path: Path
) -> None:
    mocks = MocksProcess(tmp_path / "mocks")
    try:
        wait_for("both mocks to answer", mocks.ready)
        children = mocks.children
        assert sorted(children) == ["cloud", "model"]
        assert all(_listening(port) for port in mocks.ports.values())

        mocks.proc.send_signal(sig)  # to the parent only, as a service manager does
        code = mocks.proc.wait(timeout=30)

        assert code == 0, "\n".join(mocks.lines)
        for name, pid in children.items():
            assert not _alive(pid), f"the {name} mock (pid {pid}) outlived its parent"
        for name, port in mocks.ports.items():
            assert not _listening(port), f"port {port} of the {name} mock is still open"
    finally:
        mocks.kill_everything()


def test_the_help_explains_every_option_and_shows_an_example() -> None:
    from mock_remotes.serve import build_parser

    done = subprocess.run(
        [sys.executable, "-m", "mock_remotes", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    text = done.stdout
    assert text.startswith("usage: python -m mock_remotes")
    assert "mock cloud" in text and "mock model" in text
    assert "Example" in text and "python -m mock_remotes .crashresume/mocks" in text
    assert "SIGTERM" in text  # how it stops
    flat = " ".join(text.split())
    for action in build_parser()._actions:
        assert action.help, f"{action.dest} has no help"
        words = " ".join(str(action.help).split("%(")[0].split())
        assert words in flat, f"the help of {action.dest} is not shown"
