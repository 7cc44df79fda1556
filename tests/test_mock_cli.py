"""``python -m mock_remotes`` as a user runs it: readable help, and no server left behind."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

from mock_remotes.cli import build_parser

from .fix_supervisor import wait_for

STARTING = re.compile(r"mock (cloud|model|support) starting pid=(\d+) port=(\d+)")


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
    """``python -m mock_remotes`` in the foreground, its output going to a file."""

    def __init__(self, data_dir: Path, *, support: bool = False) -> None:
        self.ports = {"cloud": _free_port(), "model": _free_port()}
        if support:
            self.ports["support"] = _free_port()
        self.out = data_dir.with_name("mock-remotes.out")
        with self.out.open("w") as out:
            self.proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "mock_remotes",
                    str(data_dir),
                    *(
                        arg
                        for name, port in self.ports.items()
                        for arg in (f"--{name}-port", str(port))
                    ),
                ],
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
            )

    @property
    def text(self) -> str:
        return self.out.read_text()

    @property
    def children(self) -> dict[str, int]:
        return {m[1]: int(m[2]) for m in STARTING.finditer(self.text)}

    def ready(self) -> bool:
        return "\nmodel http://" in self.text

    def kill_everything(self) -> None:
        for pid in [*self.children.values(), self.proc.pid]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        self.proc.wait(timeout=30)


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

        assert code == 0, mocks.text
        for name, pid in children.items():
            assert not _alive(pid), f"the {name} mock (pid {pid}) outlived its parent"
        for name, port in mocks.ports.items():
            assert not _listening(port), f"port {port} of the {name} mock is still open"
    finally:
        mocks.kill_everything()


def test_with_a_support_port_the_support_desk_runs_too_and_stops_with_the_others(
    tmp_path: Path,
) -> None:
    mocks = MocksProcess(tmp_path / "mocks", support=True)
    try:
        wait_for("the mocks to answer", lambda: "\nsupport http://" in mocks.text)
        children = mocks.children
        assert sorted(children) == ["cloud", "model", "support"]
        assert all(_listening(port) for port in mocks.ports.values())
        assert (tmp_path / "mocks" / "mock-support.sqlite3").exists()

        mocks.proc.send_signal(signal.SIGTERM)
        code = mocks.proc.wait(timeout=30)

        assert code == 0, mocks.text
        assert not any(_alive(pid) for pid in children.values())
        assert not any(_listening(port) for port in mocks.ports.values())
    finally:
        mocks.kill_everything()


def test_a_support_latency_without_a_support_port_is_a_usage_error() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "mock_remotes", "--support-latency", "0.5"],
        capture_output=True,
        text=True,
        timeout=60,
    )

    assert done.returncode == 2
    assert "--support-latency needs --support-port" in done.stderr


def test_the_help_explains_every_option_and_shows_an_example() -> None:
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
    assert "Example" in text and "python -m mock_remotes --cloud-port 8001" in text
    assert "SIGTERM" in text  # how it stops
    flat = " ".join(text.split())
    for action in build_parser()._actions:
        assert action.help, f"{action.dest} has no help"
        words = " ".join(str(action.help).split("%(")[0].split())
        assert words in flat, f"the help of {action.dest} is not shown"


def test_version_prints_the_distributions_version() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "mock_remotes", "--version"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"python -m mock_remotes {metadata.version('crashresume')}"
