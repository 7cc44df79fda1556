"""What a host is called in owner tokens (``host:pid:nonce``), and why it must be unique.

Several supervisors may share one database, each on its own host. A lease names its owner's
host and pid; a claimer proves an owner dead only on its own host (the pid is gone there),
and waits out the lease of an owner anywhere else. So the name is the whole of the proof's
reach: it must differ between hosts and agree among the processes of one host.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping

from .errors import ConfigError

HOST_ENV = "CRASHRESUME_HOST"  # this host's identity in owner tokens (default: hostname)
HOST_LIMIT = 255  # characters of an identity


def host_identity(env: Mapping[str, str] | None = None) -> str:
    """The name this process's host goes by in owner tokens: ``$CRASHRESUME_HOST``, else the
    hostname. Two hosts sharing one database must never share a name (containers cloned
    from one image often do): a supervisor proves an owner dead only when the owner's token
    names its own host and the pid is gone there, so a shared name could "prove" a live
    process on another machine dead. Raises ConfigError for a name a token cannot carry.
    Read from the environment, not from Settings: every process of a host (a supervisor,
    its forked or spawned workers, an operator's command) must agree on it, and the
    environment is what they all inherit."""
    raw = (os.environ if env is None else env).get(HOST_ENV, "")
    if raw == "":
        return socket.gethostname()
    if len(raw) > HOST_LIMIT or not all(c.isprintable() and not c.isspace() for c in raw):
        raise ConfigError(
            f"{HOST_ENV} must be at most {HOST_LIMIT} printable characters without spaces, "
            f"got {raw[:40]!r}{'...' if len(raw) > 40 else ''}"
        )
    if ":" in raw:
        raise ConfigError(f"{HOST_ENV} cannot hold ':' (it separates an owner token's parts)")
    return raw
