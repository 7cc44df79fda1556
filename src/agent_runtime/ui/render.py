"""The pages' templates (Jinja2, package data under ``templates/``) and their filters.

Autoescape is on for every template: whatever the journal holds (a tool's arguments, a
result a remote wrote, a failure reason, a run id) reaches the page HTML-escaped. The one
value marked safe is the timeline, an SVG document :mod:`agent_runtime.operator.timeline`
builds through ElementTree, which escapes every text and attribute itself.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

import jinja2
from markupsafe import Markup
from starlette.responses import HTMLResponse

from agent_runtime.logfmt import escape
from agent_runtime.operator.views import clock_text, relative

_ENV = jinja2.Environment(
    loader=jinja2.PackageLoader("agent_runtime.ui", "templates"),
    autoescape=True,
    undefined=jinja2.StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
)


def _json(value: Any) -> str:
    """Indented JSON, each line's control characters escaped as the CLI escapes them."""
    text = json.dumps(value, indent=2, sort_keys=True, default=str, ensure_ascii=False)
    return "\n".join(escape(line) for line in text.split("\n"))


def _clock(at: datetime | None, now: datetime | None = None) -> str:
    return "-" if at is None else clock_text(at, now)


def _ago(at: datetime | None, now: datetime | None) -> str:
    return "" if at is None or now is None else relative(at, now)


_ENV.filters.update(json=_json, clock=_clock, ago=_ago, text=escape)


def svg(document: str) -> Markup:
    """An SVG document inline: its XML declaration dropped, its markup kept."""
    body = document.split("?>", 1)[1] if document.startswith("<?xml") else document
    return Markup(body.strip())  # ElementTree escaped every text and attribute


def page(name: str, http_status: int = 200, **context: Any) -> HTMLResponse:
    """Template ``name`` rendered with ``context``, as an HTML response."""
    html = _ENV.get_template(name).render(**context)
    return HTMLResponse(html, status_code=http_status)
