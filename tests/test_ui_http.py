"""The dashboard over plain HTTP against a real journal: bad input, refusals, the pages.

The app is the one ``python -m agent_runtime ui`` serves (:func:`build_app`), driven through
Starlette's test client; the browser tests (tests/test_ui_browser.py) drive a real server.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

from agent_runtime.config import Settings
from agent_runtime.operator.cursor import Cursor
from agent_runtime.store import db
from agent_runtime.store.journal import Journal
from agent_runtime.ui.app import build_app
from agent_runtime.ui.guard import Guard

from .fix_runtime import run_with_intent
from .operator_cli import cli

TOKEN = "a-long-enough-token-for-tests"
HOST = "http://127.0.0.1:8765"


def client(database_url: str, token: str | None = None) -> TestClient:
    app = build_app(Settings(), database_url, Guard(token=token))
    return TestClient(app, base_url=HOST, raise_server_exceptions=False)


@pytest.fixture
def web(conn: db.Connection, database_url: str) -> Iterator[TestClient]:
    with client(database_url) as c:
        yield c


def _csrf(html: str, action: str) -> str:
    form = re.search(rf'action="/{action}".*?name="csrf" value="([0-9a-f]+)"', html, re.S)
    assert form is not None, html
    return form.group(1)


def _error(response: Any) -> str:
    found = re.search(r'<p class="error" id="error">(.*?)</p>', response.text, re.S)
    assert found is not None, response.text
    return str(found.group(1))


@pytest.mark.parametrize(
    ("query", "says"),
    [
        ("/runs?after=not-a-cursor", "is not a cursor of `runs`"),
        ("/runs?status=sleeping", "unknown status"),
        ("/runs?limit=zero", "?limit= is a whole number"),
        ("/runs?limit=0", "?limit= is between 1 and 500"),
        ("/runs?in_doubt=maybe", "?in_doubt= is a yes or no"),
        ("/runs?run=a%0Ab", "the run id searched for"),
        ("/run?id=a%0Ab", "run id"),
        ("/run", "the address needs ?id=RUN"),
    ],
)
def test_a_bad_query_parameter_is_a_400_page_with_one_clear_line(
    web: TestClient, query: str, says: str
) -> None:
    response = web.get(query)
    assert response.status_code == 400, response.text
    assert says in _error(response).replace("&#39;", "'").replace("&#96;", "`")
    assert "Traceback" not in response.text


def test_a_run_that_does_not_exist_is_a_404_page(web: TestClient) -> None:
    response = web.get("/run?id=nobody")
    assert response.status_code == 404
    assert "no run with id &#39;nobody&#39;" in _error(response)


def test_a_form_for_an_unknown_run_is_a_404_page(web: TestClient) -> None:
    response = web.post("/cancel", data={"run": "nobody", "csrf": "x"})
    assert response.status_code == 403  # no valid CSRF field for it: refused before reading
    assert web.get("/run?id=nobody").status_code == 404


def test_every_value_from_the_journal_is_html_escaped(conn: db.Connection, web: TestClient) -> None:
    journal = Journal(conn)
    evil = "<script>alert(1)</script>"
    journal.create_run("x<b>", "support-once", evil)
    listed = web.get("/runs")
    assert listed.status_code == 200
    assert "x&lt;b&gt;" in listed.text and "x<b>" not in listed.text
    shown = web.get("/run", params={"id": "x<b>"})
    assert shown.status_code == 200
    assert evil not in shown.text and "&lt;script&gt;alert(1)&lt;/script&gt;" in shown.text


def test_the_runs_list_filters_by_agent_and_pages_by_the_cli_cursor(
    conn: db.Connection, web: TestClient, database_url: str
) -> None:
    journal = Journal(conn)
    for k in range(3):
        journal.create_run(f"prov-{k}")
    journal.create_run("sup-0", "support-once", "help")
    by_agent = web.get("/runs", params={"agent": "support-once"})
    assert re.findall(r'<tr data-run="([^"]+)"', by_agent.text) == ["sup-0"]
    assert (
        cli(database_url, "runs", "--agent", "support-once", "--json").json()["runs"][0]["id"]
        == "sup-0"
    )
    first = web.get("/runs", params={"limit": "2"})
    shown = re.findall(r'<tr data-run="([^"]+)"', first.text)
    assert len(shown) == 2
    after = re.search(r'id="next" href="/runs\?([^"]+)"', first.text)
    assert after is not None
    token = re.search(r"after=([^&]+)", after.group(1))
    assert token is not None
    Cursor.decode(token.group(1))  # the CLI's own cursor
    rest = web.get("/runs?" + after.group(1).replace("&amp;", "&"))
    assert set(re.findall(r'<tr data-run="([^"]+)"', rest.text)).isdisjoint(shown)


def test_a_post_from_another_origin_or_site_is_refused_and_changes_nothing(
    conn: db.Connection, web: TestClient
) -> None:
    run_with_intent(conn, "r1")
    page = web.get("/run?id=r1").text
    form = {"run": "r1", "csrf": _csrf(page, "cancel"), "confirmed": "yes"}
    foreign = web.post("/cancel", data=form, headers={"Origin": "http://evil.test"})
    assert foreign.status_code == 403 and "origin http://evil.test" in _error(foreign)
    cross = web.post("/cancel", data=form, headers={"Sec-Fetch-Site": "cross-site"})
    assert cross.status_code == 403 and "cross-site" in _error(cross)
    forged = web.post("/cancel", data={**form, "csrf": "0" * 64})
    assert forged.status_code == 403 and "CSRF" in _error(forged)
    assert Journal(conn).require_run("r1").status == "running"
    same = web.post("/cancel", data=form, headers={"Origin": HOST, "Sec-Fetch-Site": "same-origin"})
    assert same.status_code == 200, same.text
    assert Journal(conn).require_run("r1").status == "cancelled"


def test_an_action_asks_for_confirmation_before_it_changes_anything(
    conn: db.Connection, web: TestClient
) -> None:
    run_with_intent(conn, "r1")
    form = {"run": "r1", "csrf": _csrf(web.get("/run?id=r1").text, "cancel")}
    asked = web.post("/cancel", data=form)
    assert asked.status_code == 200 and 'name="confirmed" value="yes"' in asked.text
    assert "Cancelling it is final" in asked.text
    assert Journal(conn).require_run("r1").status == "running"


def test_a_missing_token_is_refused_and_the_token_opens_the_pages(
    conn: db.Connection, database_url: str
) -> None:
    run_with_intent(conn, "r1")
    with client(database_url, TOKEN) as web:
        assert web.get("/run?id=r1").status_code == 401
        refused = web.post("/cancel", data={"run": "r1", "csrf": "x", "confirmed": "yes"})
        assert refused.status_code == 401 and "needs its token" in _error(refused)
        bearer = {"Authorization": f"Bearer {TOKEN}"}
        assert web.get("/run?id=r1", headers={"Authorization": "Bearer wrong"}).status_code == 401
        assert web.get("/run?id=r1", headers=bearer).status_code == 200
        login = web.get("/login").text
        csrf = re.search(r'name="csrf" value="([0-9a-f]+)"', login)
        assert csrf is not None
        wrong = web.post("/login", data={"token": "nope", "csrf": csrf.group(1)})
        assert wrong.status_code == 401
        web.post("/login", data={"token": TOKEN, "csrf": csrf.group(1), "then": "/runs"})
        assert web.get("/run?id=r1").status_code == 200  # the session cookie
    assert Journal(conn).require_run("r1").status == "running"


def test_without_a_token_a_request_for_another_host_is_refused(web: TestClient) -> None:
    rebound = web.get("/runs", headers={"Host": "attacker.example:8765"})
    assert rebound.status_code == 403 and "loopback address only" in _error(rebound)
    assert web.get("/runs", headers={"Host": "localhost:8765"}).status_code == 200


def test_a_non_loopback_bind_without_a_token_is_one_line_and_exit_2(database_url: str) -> None:
    refused = cli(database_url, "ui", "--bind", "0.0.0.0", CRASHRESUME_UI_TOKEN="")
    assert refused.code == 2
    lines = refused.stderr.strip().splitlines()
    assert len(lines) == 1 and "only with a token" in lines[0], refused.stderr
    short = cli(database_url, "ui", "--bind", "0.0.0.0", "--token", "short")
    assert short.code == 2 and "at least 16" in short.stderr


def _act(web: TestClient, action: str, run_id: str, **fields: str) -> Any:
    """The form of ``action`` on the run's page, sent confirmed."""
    csrf = _csrf(web.get("/run", params={"id": run_id}).text, action)
    data = {"run": run_id, "csrf": csrf, "confirmed": "yes", **fields}
    return web.post(f"/{action}", data=data, headers={"Origin": HOST})


def test_a_failed_run_is_retried_from_its_page_as_the_cli_retries_it(
    conn: db.Connection, web: TestClient, database_url: str
) -> None:
    journal = Journal(conn)
    journal.create_run("f1")
    lease = journal.claim("f1", "w:1:x", 12.0)
    assert lease is not None
    journal.fail(lease, "RemoteRejected: 422")
    done = _act(web, "retry", "f1")
    assert done.status_code == 200, done.text
    assert "f1" in done.text and "pending" in done.text
    assert journal.require_run("f1").status == "pending"
    shown = cli(database_url, "show", "f1", "--json").json()
    assert [r["previous_failure"] for r in shown["retries"]] == ["RemoteRejected: 422"]
    cancelled = _act(web, "cancel", "f1", reason="from the page")
    assert cancelled.status_code == 200
    assert journal.require_run("f1").failure == "cancelled by operator: from the page"
    run_with_intent(conn, "held")  # a live worker holds it: retry_run refuses, as in the CLI
    refused = _act(web, "retry", "held")
    assert refused.status_code == 409 and "it needs no retry" in _error(refused)


def test_a_crashed_call_is_resent_from_the_page_under_its_key(
    agent: Any, mock_servers: Any, database_url: str
) -> None:
    assert agent.run("r1", CRASH_AT="after_call", CRASH_SEQ="1").code == 1
    settings = Settings(cloud_url=mock_servers.cloud_url, model_url=mock_servers.model_url)
    app = build_app(settings, database_url, Guard())
    with TestClient(app, base_url=HOST, raise_server_exceptions=False) as web:
        page = web.get("/run", params={"id": "r1"}).text
        assert "IN DOUBT" in page and 'id="resend"' in page
        done = _act(web, "resolve", "r1", choice="resend")
    assert done.status_code == 200, done.text
    assert "remote already_done" in done.text
    assert mock_servers.resources("r1")["counts"]["databases"] == 1  # not built twice


def test_the_ui_command_serves_on_loopback_and_prints_where(database_url: str) -> None:
    env = {k: v for k, v in os.environ.items() if k != "CRASHRESUME_UI_TOKEN"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "agent_runtime", "ui", "--port", "0"],
        env={**env, "DATABASE_URL": database_url},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("dashboard: http://127.0.0.1:"), line
        url = line.split(": ", 1)[1].strip()
        assert httpx.get(f"{url}healthz", timeout=10).json() == {"status": "ok"}
        assert httpx.get(f"{url}runs", timeout=10).status_code == 200
    finally:
        proc.terminate()  # uvicorn shuts down, then lets SIGTERM end the process
        _, err = proc.communicate(timeout=30)
    assert "ui-serving url=http://127.0.0.1:" in err and "Traceback" not in err, err


def test_a_parked_run_shows_its_choices_and_a_bad_resolve_is_a_400_that_changes_nothing(
    conn: db.Connection, web: TestClient
) -> None:
    from .test_attention import _parked

    _parked(Journal(conn), "p1")
    page = web.get("/run", params={"id": "p1"}).text
    for choice in ("confirm", "redo", "fail"):
        assert f'name="choice" value="{choice}"' in page
    assert "python -m agent_runtime resolve p1 --seq 1 --redo" in page
    bad_json = _act(web, "resolve", "p1", seq="1", choice="confirm", result="{not json")
    assert bad_json.status_code == 400 and "the result of the call as JSON" in _error(bad_json)
    bad_choice = _act(web, "resolve", "p1", seq="1", choice="maybe")
    assert bad_choice.status_code == 400 and "one of confirm, redo, fail" in _error(bad_choice)
    bad_seq = _act(web, "resolve", "p1", seq="one", choice="redo")
    assert bad_seq.status_code == 400 and "a step number" in _error(bad_seq)
    no_call = _act(web, "resolve", "p1", seq="7", choice="redo")
    assert no_call.status_code == 404 and "has no tool call seq 7" in _error(no_call)
    assert Journal(conn).require_run("p1").status == "needs_attention"
    resend = _act(web, "resolve", "p1", choice="resend")  # what a once call must not get
    assert resend.status_code == 400 and "needs attention" in _error(resend)


def test_an_unreachable_database_is_a_503_page_with_one_line() -> None:
    app = build_app(Settings(), "postgresql://nobody@127.0.0.1:1/crashresume", Guard())
    with TestClient(app, base_url=HOST, raise_server_exceptions=False) as web:
        response = web.get("/runs")
    assert response.status_code == 503
    assert _error(response).startswith("cannot reach the database at 127.0.0.1:1")
    assert "Traceback" not in response.text


def test_the_dashboard_serves_the_journal_counts_as_prometheus_metrics(
    conn: db.Connection, database_url: str
) -> None:
    journal = Journal(conn)
    for run_id in ("m-1", "m-2"):
        journal.create_run(run_id)
    with client(database_url) as web:
        text = web.get("/metrics").text
    assert 'agent_runtime_runs{status="pending"} 2.0' in text, text
    assert "agent_runtime_journal_up 1.0" in text
    with client(database_url, token=TOKEN) as web:  # behind the token like every page
        assert web.get("/metrics").status_code == 401
        headers = {"Authorization": f"Bearer {TOKEN}"}
        assert web.get("/metrics", headers=headers).status_code == 200
