"""Extra server settings of a local cluster: written at every start, checked at the edge."""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest

from agent_runtime.localpg import pgconf
from agent_runtime.localpg.pgcluster import ClusterError, LocalCluster


def test_extra_settings_reach_the_running_server_and_survive_a_crash() -> None:
    cluster = LocalCluster.throwaway(settings={"wal_writer_delay": "10s", "fsync": False})
    try:
        url = cluster.ensure_running()
        with psycopg.connect(url, autocommit=True) as conn:
            assert conn.execute("SHOW wal_writer_delay").fetchone() == ("10s",)
            assert conn.execute("SHOW fsync").fetchone() == ("off",)
        cluster.stop("immediate")
        again = cluster.ensure_running()
        assert again == url
        with psycopg.connect(again, autocommit=True) as conn:
            assert conn.execute("SHOW wal_writer_delay").fetchone() == ("10s",)
    finally:
        cluster.remove()


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"port": 5999}, "manages 'port' itself"),
        ({"listen_addresses": "*"}, "manages 'listen_addresses' itself"),
        ({"fsync = off\nport": 1}, "is not a PostgreSQL setting name"),
        ({"work_mem": None}, "needs a string, number or bool"),
    ],
)
def test_settings_the_cluster_cannot_take_are_refused_before_anything_starts(
    settings: dict[str, object], message: str, tmp_path: Path
) -> None:
    with pytest.raises(ClusterError, match=message):
        LocalCluster(tmp_path / "data", settings=settings)  # type: ignore[arg-type]
    assert not (tmp_path / "data").exists()


def test_a_setting_replaces_the_default_of_the_same_name(tmp_path: Path) -> None:
    text = pgconf.render(
        port=5432, datadir=tmp_path, bindir=None, settings=pgconf.checked({"fsync": "off"})
    )
    assert text.count("fsync") == 1 and "fsync = 'off'" in text
    assert "it's" not in text
    quoted = pgconf.checked({"application_name": "it's"})
    assert quoted == {"application_name": "'it''s'"}
