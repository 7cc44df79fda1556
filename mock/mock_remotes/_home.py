"""Where ``python -m mock_remotes`` keeps its data when no DATA_DIR is given.

Beside the runtime's cluster: ``<home>/mocks``, the home being ``$CRASHRESUME_HOME``, else the
platform's per-user data directory (``~/.local/share/crashresume``), and as root the system's
state directory (``/var/lib/crashresume``). The same rule as
``agent_runtime.localpg.dbsource``, kept here because the mocks import nothing of the runtime.
"""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs

HOME_ENV = "CRASHRESUME_HOME"
APP_NAME = "crashresume"
MOCKS_DIRNAME = "mocks"


def default_data_dir() -> Path:
    """``<home>/mocks``, the home as ``agent_runtime.localpg.dbsource.default_home`` finds it."""
    configured = os.environ.get(HOME_ENV)
    if configured:
        home = Path(configured).expanduser()
    elif hasattr(os, "geteuid") and os.geteuid() == 0:
        home = Path(platformdirs.site_state_dir(APP_NAME))
    else:
        home = Path(platformdirs.user_data_dir(APP_NAME))
    return Path(os.path.abspath(home)) / MOCKS_DIRNAME
