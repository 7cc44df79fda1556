"""The pages that read: what needs a person, the runs list, one run.

Each reads through exactly the functions ``runs`` and ``show`` call
(:func:`~agent_runtime.operator.snapshot.list_runs`,
:func:`~agent_runtime.operator.snapshot.read_history`, the cursor of
:mod:`~agent_runtime.operator.cursor`), on one connection opened for the request, and
writes nothing. A bad query parameter is a :class:`~agent_runtime.errors.ConfigError`
(400 page), an unknown run :class:`~agent_runtime.errors.RunNotFound` (404 page).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from fastapi import APIRouter, Request
from starlette.responses import RedirectResponse, Response

from agent_runtime import config
from agent_runtime.errors import ConfigError
from agent_runtime.operator.cursor import Cursor
from agent_runtime.operator.snapshot import APPLICATION, STATUSES, list_runs, read_history
from agent_runtime.operator.text import format_history
from agent_runtime.operator.timeline import render
from agent_runtime.store import db
from agent_runtime.store.runid import check_run_id

from .guard import Guard
from .render import page, svg

PAGE = 50  # runs on one page of the list unless ?limit= says otherwise
MAX_PAGE = 500  # the most ?limit= may ask for
LIVE = ("pending", "running")  # statuses whose page refreshes itself
REFRESH = 2  # seconds between two refreshes of a live run's page
ATTENTION_LIMIT = 100  # parked runs shown on the needs-attention page

router = APIRouter()


@dataclass(frozen=True)
class Dashboard:
    """What every request needs: the CLI's settings, the database, the guard."""

    settings: config.Settings
    url: str
    guard: Guard

    @contextmanager
    def reading(self) -> Iterator[db.Connection]:
        """A connection to a database with this version's schema, as ``show`` opens it."""
        with db.connection(self.url, application_name=APPLICATION) as conn:
            db.require_schema(conn)
            yield conn


def dashboard(request: Request) -> Dashboard:
    found: Dashboard = request.app.state.dashboard
    return found


def _one(request: Request, name: str) -> str | None:
    values = request.query_params.getlist(name)
    if len(values) > 1:
        raise ConfigError(f"?{name}= is given {len(values)} times; give it once")
    return values[0] if values else None


def _flag(request: Request, name: str) -> bool:
    value = _one(request, name)
    if value in (None, "", "0", "no", "off"):
        return False
    if value in ("1", "yes", "on", "true"):
        return True
    raise ConfigError(f"?{name}= is a yes or no (1 or 0), got {value!r}")


def _statuses(request: Request) -> list[str]:
    chosen = sorted(
        {s.strip() for v in request.query_params.getlist("status") for s in v.split(",")}
    )
    chosen = [s for s in chosen if s]
    unknown = [s for s in chosen if s not in STATUSES]
    if unknown:
        raise ConfigError(f"unknown status {', '.join(unknown)!r}; one of {', '.join(STATUSES)}")
    return chosen


def _limit(request: Request) -> int:
    text = _one(request, "limit")
    if text is None or text == "":
        return PAGE
    try:
        value = int(text)
    except ValueError:
        raise ConfigError(f"?limit= is a whole number, got {text!r}") from None
    if not 1 <= value <= MAX_PAGE:
        raise ConfigError(f"?limit= is between 1 and {MAX_PAGE}, got {value}")
    return value


@router.get("/runs")
def runs_page(request: Request) -> Response:
    """The runs list: filters, keyset pages, a search by run id."""
    wanted = _one(request, "run")
    if wanted:  # the search box: one run, by its id
        found = check_run_id(wanted.strip(), source="the run id searched for")
        return RedirectResponse(run_url(found), status_code=303)
    statuses = _statuses(request)
    attention = _flag(request, "attention")
    if attention:  # needs attention is a status; with others chosen, their intersection
        statuses = [s for s in statuses or ["needs_attention"] if s == "needs_attention"]
    in_doubt = _flag(request, "in_doubt")
    agent = (_one(request, "agent") or "").strip() or None
    limit = _limit(request)
    after_text = _one(request, "after")
    after = Cursor.decode(after_text) if after_text else None
    if attention and not statuses:  # asked for needs attention and for other statuses only
        listing = None
    else:
        with dashboard(request).reading() as conn:
            listing = list_runs(
                conn,
                statuses=statuses,
                in_doubt=in_doubt,
                limit=limit,
                after=after,
                agent=agent,
            )
    keep: dict[str, Any] = {
        "status": statuses,
        "in_doubt": "1" if in_doubt else None,
        "attention": "1" if attention else None,
        "agent": agent,
        "limit": limit if limit != PAGE else None,
    }
    query = [(k, v) for k, vs in keep.items() for v in (vs if isinstance(vs, list) else [vs])]
    base = [(k, str(v)) for k, v in query if v is not None]
    next_url = (
        "/runs?" + urlencode([*base, ("after", listing.next)])
        if listing is not None and listing.next
        else None
    )
    return page(
        "runs.html",
        title="Runs",
        listing=listing,
        statuses=STATUSES,
        chosen=statuses,
        in_doubt=in_doubt,
        attention=attention,
        agent=agent or "",
        first_url="/runs?" + urlencode(base) if after is not None else None,
        next_url=next_url,
        live=False,
    )


def run_url(run_id: str) -> str:
    """The address of a run's page (any run id: it travels as a query parameter)."""
    return "/run?" + urlencode({"id": run_id})


def run_id_of(request: Request) -> str:
    """``?id=``, checked as every command checks a run id (400 when it is not one)."""
    run_id = _one(request, "id")
    if run_id is None:
        raise ConfigError("which run? the address needs ?id=RUN")
    return check_run_id(run_id, source="?id=")


@router.get("/run")
def run_page(request: Request) -> Response:
    """One run: its steps in order, claims and takeovers, retries, the timeline."""
    run_id = run_id_of(request)
    board = dashboard(request)
    with board.reading() as conn:
        history = read_history(conn, run_id)
    live = history.run.status in LIVE and not _flag(request, "still")
    actions = {name: board.guard.csrf(run_id, name) for name in ("cancel", "retry", "resolve")}
    return page(
        "run.html",
        title=f"Run {run_id}",
        h=history,
        run=history.run,
        now=history.now,
        timeline=svg(render(history)),
        text=format_history(history),
        csrf=actions,
        live=live,
        refresh=REFRESH,
    )


@router.get("/")
def attention_page(request: Request) -> Response:
    """What needs a person first: every parked run, its call in doubt, the choices."""
    board = dashboard(request)
    with board.reading() as conn:
        listing = list_runs(conn, statuses=["needs_attention"], limit=ATTENTION_LIMIT)
        histories = [read_history(conn, r.id) for r in listing.runs]
        doubtful = list_runs(conn, in_doubt=True, limit=ATTENTION_LIMIT)
    parked = [h for h in histories if h.attention is not None]
    others = [r for r in doubtful.runs if r.status != "needs_attention"]
    return page(
        "attention.html",
        title="Needs attention",
        parked=parked,
        more=listing.next is not None,
        doubtful=others,
        csrf={h.run.id: board.guard.csrf(h.run.id, "resolve") for h in parked},
        live=False,
    )
