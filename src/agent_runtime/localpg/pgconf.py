"""The settings file a local cluster starts with: ``<datadir>/crashresume.conf``.

:class:`agent_runtime.localpg.pgcluster.LocalCluster` rewrites it at every start and
``postgresql.conf``
includes it, so ``postgres -D <datadir>`` alone starts the server the same way. It holds the
port (persisted: a restart reuses it), the loopback-only listening address, a few sizes, the
binaries that last ran the cluster (a comment line read back by the next start), and any
extra server settings the caller asked for::

    LocalCluster(datadir, settings={"wal_writer_delay": "10s"})

Extra settings may not touch what the cluster manages itself (``MANAGED``), and their names
must look like PostgreSQL parameter names; values are written quoted, which PostgreSQL
accepts for every parameter type.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path

from agent_runtime.localpg.pgbinaries import ClusterError
from agent_runtime.localpg.pgprocess import HOST

CONF_NAME = "crashresume.conf"
MAX_CONNECTIONS = 200
SHARED_BUFFERS = "32MB"
MANAGED = frozenset({"port", "listen_addresses", "unix_socket_directories"})
_SETTING_NAME = re.compile(r"^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)?$")
SOCKET_PATH_MAX = 107  # bytes of sockaddr_un.sun_path without the NUL

Settings = Mapping[str, str | int | float | bool]


def quote(value: str) -> str:
    """A value as a quoted PostgreSQL configuration literal."""
    return "'" + value.replace("'", "''") + "'"


def checked(settings: Settings | None) -> dict[str, str]:
    """``settings`` as configuration literals, or ``ClusterError`` saying what is wrong."""
    out: dict[str, str] = {}
    for name, value in (settings or {}).items():
        if not isinstance(name, str) or not _SETTING_NAME.match(name):
            raise ClusterError(f"{name!r} is not a PostgreSQL setting name (like 'fsync').")
        if name in MANAGED:
            raise ClusterError(
                f"the local cluster manages {name!r} itself; choose the port with port=..."
            )
        if isinstance(value, bool):
            text = "on" if value else "off"
        elif isinstance(value, int | float | str):
            text = str(value)
        else:
            raise ClusterError(f"setting {name!r} needs a string, number or bool, got {value!r}")
        out[name] = quote(text)
    return out


def render(*, port: int, datadir: Path, bindir: Path | None, settings: Mapping[str, str]) -> str:
    """The file's text. ``settings`` (from :func:`checked`) replace the defaults they name."""
    socket_dir = str(datadir)
    if len(os.fsencode(f"{socket_dir}/.s.PGSQL.{port}")) > SOCKET_PATH_MAX:
        socket_dir = ""  # too long for a unix socket path: TCP only
    defaults = {
        "max_connections": str(MAX_CONNECTIONS),
        "shared_buffers": quote(SHARED_BUFFERS),
        "fsync": "on",  # durability across crashes is the point
        "logging_collector": "off",  # stderr goes to server.log
        "log_line_prefix": quote("%m [%p] "),
    }
    lines = [
        "# Written by crashresume (agent_runtime.localpg.pgcluster) at each start; edits are lost.",
        f"# bindir = {bindir}",
        f"port = {port}",
        f"listen_addresses = {quote(HOST)}",
        f"unix_socket_directories = {quote(socket_dir)}",
    ]
    lines += [f"{name} = {value}" for name, value in {**defaults, **settings}.items()]
    return "\n".join(lines) + "\n"


def read(datadir: Path) -> str:
    """The file's text, or "" if there is none yet."""
    try:
        return (datadir / CONF_NAME).read_text()
    except OSError:
        return ""


def persisted_port(text: str) -> int | None:
    match = re.search(r"^port\s*=\s*(\d+)", text, re.MULTILINE)
    return int(match.group(1)) if match else None


def persisted_bindir(text: str) -> str | None:
    match = re.search(r"^# bindir = (.+)$", text, re.MULTILINE)
    return match.group(1).strip() if match else None
