"""The actions: ``cancel``, ``retry`` and ``resolve`` as forms, each confirmed first.

Every action is a POST of a form carrying the run (``run``) and the server's CSRF field
for that run and action (:class:`~agent_runtime.ui.guard.Guard`). Without
``confirmed=yes`` it changes nothing and answers a page that says what the action will
do, with a button that sends the same form confirmed; with it, it calls exactly the
function the CLI command calls (:func:`~agent_runtime.operator.actions.cancel_run`,
:func:`~agent_runtime.operator.actions.retry_run`,
:func:`~agent_runtime.operator.actions.resolve_call` for a call in doubt of a parked run,
:func:`~agent_runtime.operator.actions.resolve_run` to re-send stranded intents) and shows
what the CLI would print. The journal keeps when (``cancelled``, ``run_retries``,
``call_resolutions``) as it does for the CLI; the log line ``ui-action`` says who (the
client's address) and what, beside the operator functions' own lines.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qs

from fastapi import APIRouter, Request
from starlette.concurrency import run_in_threadpool
from starlette.responses import Response

from agent_runtime.errors import ConfigError
from agent_runtime.operator.actions import (
    cancel_run,
    parse_result,
    resolve_call,
    resolve_run,
    retry_run,
)
from agent_runtime.operator.attention import CHOICES, Choice, meaning
from agent_runtime.operator.snapshot import read_history
from agent_runtime.operator.text import (
    format_call_resolution,
    format_cancellation,
    format_resolution,
    format_retry,
)
from agent_runtime.operator.views import RunHistory
from agent_runtime.store.runid import check_run_id

from .pages import Dashboard, dashboard, run_url
from .render import page

log = logging.getLogger(__name__)
router = APIRouter()
FORM_LIMIT = 1_000_000  # bytes of a form body read at most


class Refused(Exception):
    """A request the guard turned down; ``status`` is 401 or 403."""

    def __init__(self, reason: str, status: int) -> None:
        super().__init__(reason)
        self.status = status


async def read_form(request: Request) -> dict[str, str]:
    """The urlencoded fields of a POST (each given once; the last one wins)."""
    body = await request.body()
    if len(body) > FORM_LIMIT:
        raise ConfigError(f"a form of {len(body)} bytes is more than this dashboard reads")
    try:
        fields = parse_qs(body.decode(), keep_blank_values=True, strict_parsing=False)
    except UnicodeDecodeError:
        raise ConfigError("the form is not UTF-8 text") from None
    return {k: v[-1] for k, v in fields.items()}


def own_origin(request: Request) -> str:
    return f"{request.url.scheme}://{request.headers.get('host', '')}"


def check_post(request: Request, form: dict[str, str], run_id: str, action: str) -> None:
    """Refuse a cross-site POST or one without the server's CSRF field."""
    board = dashboard(request)
    reason = board.guard.post_refusal(
        run_id=run_id,
        action=action,
        given=form.get("csrf"),
        origin=request.headers.get("origin"),
        fetch_site=request.headers.get("sec-fetch-site"),
        own_origin=own_origin(request),
    )
    if reason is not None:
        log.warning(
            "ui-refused action=%s run=%s client=%s reason=%r",
            action,
            run_id,
            _client(request),
            reason,
        )
        raise Refused(reason, 403)


def _client(request: Request) -> str:
    return request.client.host if request.client is not None else "unknown"


async def _act(
    request: Request, action: str, plan: Callable[[Dashboard, str, dict[str, str]], Any]
) -> Response:
    """Check the form, then either ask for confirmation or act (in a worker thread)."""
    form = await read_form(request)
    run_id = check_run_id(form.get("run", ""), source="the form's run")
    check_post(request, form, run_id, action)
    board = dashboard(request)
    confirmed = form.get("confirmed") == "yes"
    if not confirmed:
        history = await run_in_threadpool(_history, board, run_id)
        return page(
            "confirm.html",
            title=f"{action.capitalize()} run {run_id}?",
            action=action,
            run=history.run,
            h=history,
            form=form,
            what=_what(action, form, history),
            run_link=run_url(run_id),
            live=False,
        )
    outcome: str = await run_in_threadpool(plan, board, run_id, form)
    log.info("ui-action action=%s run=%s client=%s", action, run_id, _client(request))
    return page(
        "done.html",
        title=f"{action.capitalize()} run {run_id}: done",
        action=action,
        run_id=run_id,
        outcome=outcome,
        run_link=run_url(run_id),
        live=False,
    )


def _history(board: Dashboard, run_id: str) -> RunHistory:
    with board.reading() as conn:
        return read_history(conn, run_id)  # RunNotFound for a run that is not there


def _choice(form: dict[str, str]) -> Choice | None:
    value = form.get("choice") or None
    if value is None or value == "resend":
        return None
    for choice in CHOICES:
        if value == choice:
            return choice
    raise ConfigError(f"a call in doubt is resolved by one of {', '.join(CHOICES)}, got {value!r}")


def _seq(form: dict[str, str]) -> int:
    text = form.get("seq", "")
    try:
        return int(text)
    except ValueError:
        raise ConfigError(f"the call to resolve is a step number, got {text!r}") from None


def _what(action: str, form: dict[str, str], history: RunHistory) -> str:
    """What the confirmed form will do, in a sentence (checked as the action checks it)."""
    run = history.run
    holder = f", held by {run.owner} (generation {run.generation})" if run.owner else ""
    if action == "cancel":
        return (
            f"Run {run.id} is {run.status}{holder}. Cancelling it is final: it becomes "
            "cancelled, its worker stops at its next journal write and sends nothing more, "
            "and a cancelled run cannot be retried."
        )
    if action == "retry":
        return (
            f"Run {run.id} is {run.status}{holder}. A retry puts a failed run back to pending "
            "(or ends a free run's backoff now): its attempts and give-up clock start again, "
            "and its old failure stays in its history."
        )
    choice = _choice(form)
    if choice is None:
        takeover = " taking it even from a live worker (fenced out)" if form.get("takeover") else ""
        return (
            f"Re-send every intent of run {run.id} that has no confirm, under its own key, "
            f"now{takeover}, and take no further step."
        )
    seq = _seq(form)
    key = f"{run.id}:{seq}"
    if choice == "confirm":
        parse_result(form.get("result", ""))  # a bad JSON is refused before the question
    return f"Record for call seq {seq} of run {run.id}: {meaning(choice, key)}."


def _cancel(board: Dashboard, run_id: str, form: dict[str, str]) -> str:
    with board.reading() as conn:
        return format_cancellation(cancel_run(conn, run_id, form.get("reason") or None))


def _retry(board: Dashboard, run_id: str, form: dict[str, str]) -> str:
    with board.reading() as conn:
        return format_retry(retry_run(conn, run_id))


def _resolve(board: Dashboard, run_id: str, form: dict[str, str]) -> str:
    choice = _choice(form)
    if choice is None:
        takeover = bool(form.get("takeover"))
        resolution = resolve_run(board.settings, board.url, run_id, takeover=takeover)
        return format_resolution(resolution)
    seq = _seq(form)
    result = parse_result(form.get("result", "")) if choice == "confirm" else None
    with board.reading() as conn:
        resolved = resolve_call(
            conn, run_id, seq, choice, result=result, reason=form.get("reason") or None
        )
    return format_call_resolution(resolved)


@router.post("/cancel")
async def cancel(request: Request) -> Response:
    return await _act(request, "cancel", _cancel)


@router.post("/retry")
async def retry(request: Request) -> Response:
    return await _act(request, "retry", _retry)


@router.post("/resolve")
async def resolve(request: Request) -> Response:
    return await _act(request, "resolve", _resolve)
