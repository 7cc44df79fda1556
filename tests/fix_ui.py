"""Fixtures for the dashboard: a real server on a free port, and headless Chromium.

The server is the app ``python -m agent_runtime ui`` serves, under uvicorn in a thread of
the test process, on a socket bound to 127.0.0.1 port 0 (:func:`agent_runtime.ui.app.listen`),
over the session's real journal. The browser is Debian's ``chromium`` (``.ci/run``
installs it; ``CRASHRESUME_CHROMIUM`` names another binary), driven by Playwright through
``executable_path``. Where none can be had the browser tests skip, saying why, except under
``CI=true`` (GitHub sets it; its Ubuntu runners ship Chrome): there a missing browser is a
failure, so a CI that silently stopped testing the dashboard cannot pass.
"""

from __future__ import annotations

import os
import shutil
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import uvicorn

from agent_runtime.config import Settings
from agent_runtime.ui.app import build_app, listen
from agent_runtime.ui.guard import Guard

STARTUP = 10.0  # seconds the server may take to answer
SCREENSHOTS = Path(__file__).resolve().parent.parent / "artifacts" / "screenshots"
# Debian's chromium first, then the names other systems (GitHub's Ubuntu runners) use.
CHROMIUM = ("chromium", "chromium-browser", "/usr/lib/chromium/chromium", "google-chrome")
CHROMIUM_ENV = "CRASHRESUME_CHROMIUM"  # a browser binary to use instead


def _chromium() -> str | None:
    for name in (os.environ.get(CHROMIUM_ENV), *CHROMIUM):
        if not name:
            continue
        found = shutil.which(name) or (name if os.access(name, os.X_OK) else None)
        if found:
            return found
    return None


def _unavailable(reason: str) -> None:
    if os.environ.get("CI") == "true":  # .ci/run installed it: missing is a failure
        pytest.fail(f"{reason}, and CI=true: .ci/run should have installed it")
    pytest.skip(reason)


class Served:
    """The dashboard under uvicorn in a thread; ``url`` is where it answers."""

    def __init__(self, database_url: str, settings: Settings, token: str | None) -> None:
        self.sock = listen("127.0.0.1", 0)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        app = build_app(settings, database_url, Guard(token=token))
        config = uvicorn.Config(app, log_config=None, access_log=False, lifespan="off")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(
            target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True
        )
        self.thread.start()
        deadline = time.monotonic() + STARTUP
        while not self.server.started:
            assert time.monotonic() < deadline, "the dashboard did not start"
            time.sleep(0.02)

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=STARTUP)
        self.sock.close()


@pytest.fixture
def dashboard(database_url: str, mock_servers: Any, conn: Any) -> Iterator[Served]:
    """The dashboard over the test's journal, its ``resolve`` wired to the mocks."""
    settings = Settings(cloud_url=mock_servers.cloud_url, model_url=mock_servers.model_url)
    served = Served(database_url, settings, token=None)
    try:
        yield served
    finally:
        served.stop()


@pytest.fixture(scope="session")
def chromium() -> Iterator[Any]:
    """One headless Chromium for the session (``--no-sandbox``: CI runs it as root)."""
    executable = _chromium()
    if executable is None:
        _unavailable("no chromium on this machine (Debian: apt-get install chromium)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _unavailable("the playwright package is not installed (the test extra has it)")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=executable, headless=True, args=["--no-sandbox"]
        )
        try:
            yield browser
        finally:
            browser.close()


@pytest.fixture
def tab(chromium: Any) -> Iterator[Any]:
    """A fresh browser context and its page per test (no cookie carried over)."""
    context = chromium.new_context(viewport={"width": 1400, "height": 900})
    tab = context.new_page()
    tab.set_default_timeout(15_000)
    try:
        yield tab
    finally:
        context.close()


def screenshot(tab: Any, name: str) -> Path:
    """Keep what ``tab`` shows as ``artifacts/screenshots/NAME.png`` (a CI artifact)."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    tab.screenshot(path=str(path), full_page=True)
    return path
