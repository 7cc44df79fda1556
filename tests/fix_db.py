"""Database fixtures, following DESIGN section 2 for tests.

``database_url`` (session) comes from, in order:

1. ``$DATABASE_URL`` (the CI workflow's ``services: postgres``);
2. a testcontainers ``PostgresContainer`` when a Docker daemon answers a ping (a missing daemon
   costs microseconds; testcontainers not installed, or a container that will not start, falls
   back to step 3 with one log line; ``CRASHRESUME_NO_DOCKER=1`` skips this step);
3. a throwaway ``LocalCluster`` in ``/tmp/crashresume-pg-*``, removed at session end. Session
   fixtures are per process, so each pytest-xdist worker gets its own.

``pg_cluster`` (session) is that local cluster, for tests that crash and restart the server
(``stop(mode="immediate")`` then ``ensure_running()``); it skips when 1 or 2 is in use. The
restart keeps the port, so ``database_url`` stays valid, unless another process grabbed the
port in between: ``ensure_running()`` then returns the new URL, which is the one to use.
"""

from __future__ import annotations

import logging
import os
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import pytest

from agent_runtime.localpg.dbsource import DATABASE_URL_ENV, docker_available
from agent_runtime.localpg.pgcluster import ClusterError, LocalCluster

log = logging.getLogger(__name__)

CONTAINER_IMAGE = "postgres:16-alpine"
CONTAINER_DB = "crashresume"


@dataclass(frozen=True, kw_only=True)
class DbSource:
    """Where this session's database lives."""

    kind: str  # "DATABASE_URL" | "docker" | "local"
    url: str
    cluster: LocalCluster | None = None


def _start_container() -> tuple[Any, str] | None:
    """A started container and its URL, or None (logged once) to use the local cluster."""
    with warnings.catch_warnings():  # third-party import-time deprecations are not ours
        warnings.simplefilter("ignore")
        try:
            try:
                from testcontainers.community.postgres import PostgresContainer
            except ImportError:
                from testcontainers.postgres import PostgresContainer
        except ImportError as exc:
            log.warning(
                "db-container-skipped reason=testcontainers-not-installed error=%r "
                "fallback=local-cluster hint=%r",
                str(exc),
                "pip install -e '.[test]' installs it",
            )
            return None
    container = PostgresContainer(CONTAINER_IMAGE, dbname=CONTAINER_DB, driver=None)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            container.start()
        url: str = container.get_connection_url(driver=None)
    except Exception as exc:  # any Docker trouble: fall back to the local cluster
        log.warning("db-container-failed image=%s error=%r", CONTAINER_IMAGE, str(exc))
        try:
            container.stop()
        except Exception:
            log.debug("db-container-stop-failed", exc_info=True)
        return None
    return container, url


@contextmanager
def session_source() -> Iterator[DbSource]:
    """Pick and start this session's database (see the module docstring); clean up after."""
    configured = os.environ.get(DATABASE_URL_ENV)
    if configured:
        yield DbSource(kind=DATABASE_URL_ENV, url=configured)
        return
    # CRASHRESUME_NO_DOCKER=1 skips the container even where a daemon answers, so CI can
    # exercise the self-started cluster on a machine that has Docker.
    if not os.environ.get("CRASHRESUME_NO_DOCKER") and docker_available():
        started = _start_container()
        if started is not None:
            container, url = started
            try:
                yield DbSource(kind="docker", url=url)
            finally:
                container.stop()
            return
    cluster = LocalCluster.throwaway()
    try:
        url = cluster.ensure_running()
    except ClusterError as exc:
        cluster.remove()
        pytest.fail(f"Cannot start the throwaway PostgreSQL cluster: {exc}", pytrace=False)
    try:
        yield DbSource(kind="local", url=url, cluster=cluster)
    finally:
        cluster.remove()


@pytest.fixture(scope="session")
def db_source() -> Iterator[DbSource]:
    with session_source() as source:
        yield source


@pytest.fixture(scope="session")
def database_url(db_source: DbSource) -> str:
    """A URL to a database this test session may use (see the module docstring)."""
    return db_source.url


@pytest.fixture(scope="session")
def pg_cluster(db_source: DbSource) -> LocalCluster:
    """The session's local cluster, to crash and restart; skips unless the local path is used."""
    if db_source.cluster is None:
        pytest.skip(f"needs the throwaway local cluster; this session uses {db_source.kind}")
    return db_source.cluster
