"""Where the CLI's data lives by default: one per-user place, whatever the working directory."""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

import platformdirs
import pytest

from agent_runtime.localpg import dbsource
from agent_runtime.localpg.pgbinaries import ServerAccount, blocking_dir, server_account
from mock_remotes._home import default_data_dir

AS_ROOT = os.geteuid() == 0
REPO = Path(__file__).resolve().parents[1]
# A plain account may not reach this interpreter (a pyenv under /root): the system's Python of
# the same minor version runs the same sources and site-packages.
PLAIN_PYTHON = shutil.which(
    f"python{sys.version_info.major}.{sys.version_info.minor}", path="/usr/bin"
)


def test_the_environment_overrides_the_default_home(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("CRASHRESUME_HOME", str(tmp_path / "h"))
    assert dbsource.default_home() == tmp_path / "h"
    assert default_data_dir() == tmp_path / "h" / "mocks"


def test_without_the_environment_the_home_is_per_user_not_per_directory(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("CRASHRESUME_HOME")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.chdir(tmp_path)
    home = dbsource.default_home()
    assert home == dbsource.platform_home()
    assert dbsource.platform_home(as_root=False) == tmp_path / "data" / "crashresume"
    assert dbsource.platform_home(as_root=True) == Path(platformdirs.site_state_dir("crashresume"))
    assert default_data_dir() == home / "mocks"  # the mocks' data beside the cluster
    assert not str(home).startswith(str(tmp_path / ".crashresume"))


@pytest.mark.skipif(not AS_ROOT, reason="only root runs the server as another account")
def test_as_root_the_server_account_can_reach_the_default_home() -> None:
    account = server_account()
    home = dbsource.platform_home()
    assert blocking_dir(home, account) is None, f"{account.name} cannot reach {home}"
    # root's own data directory is the trap: /root is mode 0700
    root_data = Path(platformdirs.user_data_dir("crashresume"))
    if root_data.is_relative_to("/root") and Path("/root").stat().st_mode & 0o007 == 0:
        assert blocking_dir(root_data, account) is not None


def _readable_code(account: ServerAccount, home: Path) -> list[Path]:
    """The sources and site-packages, where ``account`` can read them: in place, or (a clone
    in a 0700 folder, as CI makes) copied into ``home``, which is the account's own; no
    permission outside it is widened."""
    places = [REPO / "src", REPO / "mock", Path(sysconfig.get_paths()["purelib"])]
    if all(blocking_dir(place, account) is None for place in places):
        return places
    copies = []
    for i, place in enumerate(places):
        copy = home / "code" / str(i)
        shutil.copytree(place, copy, symlinks=True, ignore=shutil.ignore_patterns("__pycache__"))
        copies.append(copy)
    for root, dirs, files in os.walk(home / "code"):
        for name in [root, *(os.path.join(root, n) for n in dirs + files)]:
            os.lchown(name, account.uid, account.gid)
    os.chown(home / "code", account.uid, account.gid)
    return copies


@pytest.mark.skipif(not AS_ROOT, reason="needs root to run a command as a plain user")
@pytest.mark.skipif(PLAIN_PYTHON is None, reason="no system Python of this version")
def test_a_plain_user_starts_the_cli_cluster_in_its_own_data_directory() -> None:
    account = server_account()
    user_home = Path(tempfile.mkdtemp(prefix="crashresume-user-"))
    os.chown(user_home, account.uid, account.gid)
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in {"CRASHRESUME_HOME", "XDG_DATA_HOME", "DATABASE_URL"}
    }
    env["HOME"] = str(user_home)
    env["PYTHONPATH"] = os.pathsep.join(str(p) for p in _readable_code(account, user_home))

    def db(action: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(PLAIN_PYTHON), "-m", "agent_runtime", "db", action],
            env=env,
            cwd=user_home,
            capture_output=True,
            text=True,
            timeout=120,
            user=account.uid,
            group=account.gid,
            extra_groups=[],
        )

    try:
        started = db("start")
        assert started.returncode == 0, started.stderr
        datadir = user_home / ".local" / "share" / "crashresume" / "pgdata"
        assert (datadir / "PG_VERSION").exists()
        assert not (user_home / ".crashresume").exists()
        stopped = db("stop")
        assert stopped.returncode == 0, stopped.stderr
        assert f"stopped the local cluster in {datadir}" in stopped.stdout
    finally:
        db("stop")
        shutil.rmtree(user_home, ignore_errors=True)


def test_an_old_home_in_the_working_directory_is_named_once(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(dbsource, "_warned_old_home", False)
    monkeypatch.setenv("CRASHRESUME_HOME", str(tmp_path / "h"))
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".crashresume").mkdir()
    with caplog.at_level(logging.WARNING, logger="agent_runtime.localpg.dbsource"):
        dbsource.default_home()
        dbsource.default_home()
    lines = [r.getMessage() for r in caplog.records if r.name == "agent_runtime.localpg.dbsource"]
    assert len(lines) == 1
    assert lines[0].startswith(f"old-home-ignored path={tmp_path / '.crashresume'} ")
    assert f"home={tmp_path / 'h'} " in lines[0]
