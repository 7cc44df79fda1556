"""The test session's own data home: no test touches the real per-user one.

At configure time (before any test module is imported, so that defaults computed at import
see it, and every subprocess inherits it) ``CRASHRESUME_HOME`` and ``XDG_DATA_HOME`` point
into one fresh directory under ``/tmp`` (mode 0755, so that as root the unprivileged server
account can traverse it). A test that needs another home sets its own with ``monkeypatch`` or
a subprocess environment. At session end a cluster some command left running there is stopped
and the directory removed.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

HOME_ENV = "CRASHRESUME_HOME"
_session_root: Path | None = None


def session_home() -> Path:
    """The ``CRASHRESUME_HOME`` every test sees unless it sets its own."""
    assert _session_root is not None, "fix_home is not configured"
    return _session_root / "home"


def pytest_configure(config: pytest.Config) -> None:
    global _session_root
    if _session_root is not None:
        return
    _session_root = Path(tempfile.mkdtemp(prefix="crashresume-session-home-"))
    _session_root.chmod(0o755)
    os.environ[HOME_ENV] = str(session_home())
    os.environ["XDG_DATA_HOME"] = str(_session_root / "xdg-data")


def pytest_unconfigure(config: pytest.Config) -> None:
    global _session_root
    if _session_root is None:
        return
    if (session_home() / "pgdata").exists():
        from agent_runtime.localpg.dbsource import stop_cli_cluster

        stop_cli_cluster(session_home())
    shutil.rmtree(_session_root, ignore_errors=True)
    _session_root = None
