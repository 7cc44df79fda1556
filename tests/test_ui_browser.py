"""The dashboard in a real browser: headless Chromium against a real server and journal.

Runs are made by real agent processes (crashed at a crash point, parked on a ``once`` call,
or running while the page cancels them); the page is the only thing that acts. Each test
leaves a screenshot of what it saw under ``artifacts/screenshots/`` (kept by CI).
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from agent_runtime.config import Settings
from agent_runtime.store.journal import Journal

from .desk import EMAIL, Desk, parked
from .fix_runtime import Agent
from .fix_supervisor import wait_for
from .fix_ui import Served, screenshot

TOKEN = "browser-test-token-0123456789"
CANCEL_LATENCY = 2.0  # seconds each cloud call takes while the page cancels the run


def _open_run(tab: Any, base: str, run_id: str) -> None:
    tab.goto(f"{base}/runs")
    tab.click(f'tr[data-run="{run_id}"] a')
    tab.wait_for_selector("#summary")


def test_a_crash_and_resume_run_appears_with_its_takeover(
    agent: Agent, dashboard: Served, tab: Any
) -> None:
    assert agent.run("r1", CRASH_AT="after_call", CRASH_SEQ="1").code == 1
    assert agent.run("r1").code == 0

    tab.goto(f"{dashboard.url}/runs")
    row = tab.locator('tr[data-run="r1"]')
    assert row.locator(".status").inner_text() == "done"
    screenshot(tab, "runs")
    _open_run(tab, dashboard.url, "r1")

    assert tab.inner_text("#status") == "done"
    claims = tab.locator("#claims tr[data-generation]")
    assert claims.count() == 2
    takeover = tab.locator('#claims tr[data-generation="2"]')
    assert "takeover" in takeover.inner_text() and "owner_dead" in takeover.inner_text()
    resent = tab.locator('#steps tr[data-seq="1"]')
    assert "re-sent under the same key" in resent.inner_text()
    assert "already_done" in resent.inner_text()
    timeline = tab.locator("#timeline svg")
    assert timeline.get_attribute("data-run") == "r1"
    assert tab.locator('#timeline g[data-kind="takeover"]').count() == 1
    assert tab.locator('#timeline g[data-kind="crash"]').count() == 1
    assert tab.locator("meta[http-equiv=refresh]").count() == 0  # a done run stands still
    screenshot(tab, "run")


def test_a_parked_once_run_is_resolved_from_the_page_and_then_finishes(
    desk: Desk, conn: Any, dashboard: Served, tab: Any
) -> None:
    run_id = "once-web"
    parked(desk, conn, run_id, "after_call")
    (delivery,) = desk.deliveries(run_id)  # the operator looked: the email went out

    tab.goto(dashboard.url)
    card = tab.locator(f'.attention[data-run="{run_id}"]')
    text = card.inner_text()
    assert "send_email" in text and f"{run_id}:{EMAIL}" in text and "ada@example.test" in text
    assert "nothing can tell whether it acted" in text
    for choice in ("confirm", "redo", "fail"):
        assert card.locator(f'input[value="{choice}"]').count() == 1
    screenshot(tab, "attention")

    card.locator('input[value="confirm"]').check()
    card.locator("textarea[name=result]").fill(json.dumps(delivery))
    card.locator("button", has_text="Resolve").click()
    assert "Record for call seq 2" in tab.inner_text("#what")
    assert Journal(conn).require_run(run_id).status == "needs_attention"  # not yet
    tab.click("#confirm")
    assert "confirmed" in tab.inner_text("#outcome")
    assert Journal(conn).require_run(run_id).status == "pending"

    finished = desk.run(run_id, "support_once")
    assert finished.code == 0, finished.out
    assert len(desk.deliveries(run_id)) == 1  # never sent twice
    tab.click("#back")
    assert tab.inner_text("#status") == "done"
    assert "confirm" in tab.inner_text("#resolutions")
    tab.goto(dashboard.url)
    assert tab.locator("#nothing").count() == 1


def test_a_cancel_from_the_page_stops_a_running_run(
    agent: Agent, mock_servers: Any, conn: Any, dashboard: Served, tab: Any
) -> None:
    mock_servers.set_cloud_faults(latency=CANCEL_LATENCY)
    worker = subprocess.Popen(
        [sys.executable, "-m", "agent_runtime"],
        env=agent.env("c1"),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        journal = Journal(conn)
        wait_for("the run to be running", lambda: _status(conn, "c1") == "running")
        _open_run(tab, dashboard.url, "c1")
        assert tab.locator("meta[http-equiv=refresh]").count() == 1  # live while it runs
        tab.click("#cancel")
        assert "Cancelling it is final" in tab.inner_text("#what")
        tab.click("#confirm")
        assert "cancelled" in tab.inner_text("#outcome")
        out, _ = worker.communicate(timeout=60)
    finally:
        mock_servers.set_cloud_faults(latency=0.0)
        if worker.poll() is None:
            worker.kill()
            worker.communicate()
    assert worker.returncode != 0, out
    run = journal.require_run("c1")
    assert run.status == "cancelled" and run.owner is None
    assert mock_servers.resources("c1")["counts"]["dns_records"] == 0  # it never finished
    tab.click("#back")
    assert tab.inner_text("#status") == "cancelled"


def _status(conn: Any, run_id: str) -> str | None:
    row = conn.execute("SELECT status FROM runs WHERE id = %s", (run_id,)).fetchone()
    return None if row is None else str(row["status"])


class _Evil(BaseHTTPRequestHandler):
    """Another site's page that posts a confirmed cancel to the dashboard on load."""

    form = ""

    def do_GET(self) -> None:
        body = self.form.encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def evil_site() -> Iterator[tuple[type[_Evil], str]]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Evil)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield _Evil, f"http://localhost:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_a_cross_site_post_is_refused_even_with_a_leaked_csrf_field(
    conn: Any, dashboard: Served, tab: Any, evil_site: tuple[type[_Evil], str]
) -> None:
    from .fix_runtime import run_with_intent

    run_with_intent(conn, "r1")
    tab.goto(f"{dashboard.url}/run?id=r1")
    csrf = tab.locator('form[action="/cancel"] input[name=csrf]').get_attribute("value")
    handler, site = evil_site
    handler.form = (
        f'<form id="f" method="post" action="{dashboard.url}/cancel">'
        f'<input name="run" value="r1"><input name="csrf" value="{csrf}">'
        '<input name="confirmed" value="yes"></form>'
        "<script>document.getElementById('f').submit()</script>"
    )
    with tab.expect_navigation(url=f"{dashboard.url}/cancel") as navigation:
        tab.goto(site)
    response = navigation.value
    assert response.status == 403
    assert "refused a cross-site request" in tab.inner_text("#error")
    assert Journal(conn).require_run("r1").status == "running"


def test_without_the_token_the_browser_is_refused_until_it_logs_in(
    conn: Any, database_url: str, tab: Any
) -> None:
    from .fix_runtime import run_with_intent

    run_with_intent(conn, "r1")
    served = Served(database_url, Settings(), token=TOKEN)
    try:
        shown = tab.goto(f"{served.url}/run?id=r1")
        assert shown.status == 401 and tab.locator("input[name=token]").count() == 1
        posted = tab.request.post(
            f"{served.url}/cancel", form={"run": "r1", "csrf": "x", "confirmed": "yes"}
        )
        assert posted.status == 401
        tab.fill("input[name=token]", "not-the-token-at-all")
        tab.click("button.go")
        assert "not this dashboard's token" in tab.inner_text("#error")
        tab.fill("input[name=token]", TOKEN)
        tab.click("button.go")
        assert tab.inner_text("#status") == "running"  # back where it was going
        tab.click("#cancel")
        tab.click("#confirm")
        assert "cancelled" in tab.inner_text("#outcome")
    finally:
        served.stop()
    assert Journal(conn).require_run("r1").status == "cancelled"
