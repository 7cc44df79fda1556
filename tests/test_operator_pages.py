"""``runs --after CURSOR``: keyset pages through the runs list (issue 24 point 1).

A page starts after the last run of the previous one, in the order of the index that
serves it (a run's last activity, newest first, then its id); every run is listed once,
ties of activity included, and the text and JSON say where the next page starts."""

from __future__ import annotations

import pytest

from agent_runtime.errors import EXIT_USAGE
from agent_runtime.operator.cursor import Cursor
from agent_runtime.operator.snapshot import list_runs
from agent_runtime.store import clock, db
from agent_runtime.store.journal import Journal

from .fix_runtime import run_with_intent
from .operator_cli import cli


def _pages(conn: db.Connection, limit: int, **filters: object) -> list[list[str]]:
    pages: list[list[str]] = []
    after = None
    while True:
        listing = list_runs(conn, limit=limit, after=after, **filters)  # type: ignore[arg-type]
        pages.append([r.id for r in listing.runs])
        if listing.next is None:
            return pages
        after = Cursor.decode(listing.next)


@pytest.fixture
def journal(conn: db.Connection, frozen_clock: object) -> Journal:
    """Eleven runs: five created at one instant (a tie), then one a second for six more,
    two of them holding an intent in doubt."""
    journal = Journal(conn)
    for k in range(5):
        journal.create_run(f"tie-{k}")
    for k in range(6):
        clock.advance(conn, 1.0)
        if k in (1, 4):
            run_with_intent(conn, f"doubt-{k}")
        else:
            journal.create_run(f"later-{k}")
    return journal


@pytest.mark.parametrize("limit", [1, 2, 3, 4, 10])
def test_pages_list_every_run_once_in_the_order_of_one_long_list(
    conn: db.Connection, journal: Journal, limit: int
) -> None:
    whole = [r.id for r in list_runs(conn, limit=None).runs]
    assert whole[:2] == ["later-5", "doubt-4"] and whole[-5:] == [f"tie-{k}" for k in range(5)]
    pages = _pages(conn, limit)
    assert [run for page in pages for run in page] == whole
    assert all(len(page) == limit for page in pages[:-1]) and 0 < len(pages[-1]) <= limit
    pending = _pages(conn, limit, statuses=["pending"])
    assert [run for page in pending for run in page] == [r for r in whole if "doubt" not in r]
    doubtful = _pages(conn, limit, in_doubt=True)
    assert [run for page in doubtful for run in page] == ["doubt-4", "doubt-1"]


def test_a_run_active_between_two_pages_moves_to_the_top_without_shifting_the_next(
    conn: db.Connection, journal: Journal
) -> None:
    first = list_runs(conn, limit=3)
    assert [r.id for r in first.runs] == ["later-5", "doubt-4", "later-3"]
    clock.advance(conn, 1.0)
    journal.claim("tie-0", "w", 60.0)  # the oldest run becomes the newest
    assert first.next is not None
    second = list_runs(conn, limit=3, after=Cursor.decode(first.next))
    assert [r.id for r in second.runs] == ["later-2", "doubt-1", "later-0"]


def test_the_runs_command_prints_the_next_cursor_and_refuses_a_bad_one(
    conn: db.Connection, journal: Journal, database_url: str
) -> None:
    page = cli(database_url, "runs", "--limit", "4", "--json").json()
    assert [r["id"] for r in page["runs"]] == ["later-5", "doubt-4", "later-3", "later-2"]
    rest = cli(database_url, "runs", "--limit", "0", "--after", page["next"], "--json").json()
    assert rest["next"] is None and len(rest["runs"]) == 7
    assert "total" not in page  # migration 0011: counting every run is not a page's cost
    for token in ("not-a-cursor", "eyJ4IjoxfQ", Cursor.decode(page["next"]).encode()[:-3]):
        bad = cli(database_url, "runs", "--after", token)
        assert bad.code == EXIT_USAGE and bad.stdout == "", bad
        (line,) = bad.stderr.splitlines()
        assert "is not a cursor" in line
