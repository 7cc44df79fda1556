"""The operator's text output: the ``runs`` table, ``show``'s history, and one-line results.

Every value is printed through :func:`agent_runtime.logfmt.escape`, so a run id, a
failure reason or an argument can neither break a line of the table nor send a control
sequence to the terminal; columns are padded by display width (``wcwidth``), so wide
characters (``日本``, ``🚀``) keep the table aligned.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime

from wcwidth import wcswidth

from ..logfmt import escape
from .attention import Attention, CallResolution, PastResolution
from .cancelled import Cancellation, Cancelled, InFlight, nothing_in_flight
from .outcomes import Resolution, Retry
from .views import (
    PastRetry,
    RunHistory,
    RunList,
    Step,
    clock_text,
    relative,
)


def _width(cell: str) -> int:
    width = wcswidth(cell)
    return width if width >= 0 else len(cell)


def _table(header: tuple[str, ...], rows: Sequence[tuple[str, ...]]) -> list[str]:
    cells = [tuple(escape(c) for c in r) for r in (header, *rows)]
    widths = [max(_width(r[i]) for r in cells) for i in range(len(header))]
    return [
        "  ".join(c + " " * (w - _width(c)) for c, w in zip(r, widths, strict=True)).rstrip()
        for r in cells
    ]


def _lines(lines: list[str]) -> str:
    """One string of ``lines``, each escaped: a value can never start a line of its own."""
    return "\n".join(escape(line) for line in lines)


def _lease_text(expires: datetime | None, owner: str | None, now: datetime) -> str:
    if expires is None:
        return "-"
    if owner is None:  # a free run's lease_expires_at is its backoff
        return (
            f"backoff until {clock_text(expires, now)} ({relative(expires, now)})"
            if (expires > now)
            else "-"
        )
    verb = "expires" if expires > now else "expired"
    return f"{verb} {clock_text(expires, now)} ({relative(expires, now)})"


def format_runs(listing: RunList, *, filtered: bool) -> str:
    if not listing.runs:
        return "no runs match" if filtered else "no runs yet"
    now = listing.now
    assert now is not None
    rows = [
        (
            r.id,
            "backing-off" if r.backing_off else r.status,
            str(r.generation),
            str(r.steps),
            str(r.llm_calls),
            str(r.in_doubt) if r.in_doubt else "-",
            (r.owner or "-") + (" (gone)" if r.owner_gone else ""),
            _lease_text(r.lease_expires_at, r.owner, now),
            f"{clock_text(r.updated_at, now)} ({relative(r.updated_at, now)})",
            r.failure or "-",
        )
        for r in listing.runs
    ]
    header = (
        "RUN",
        "STATUS",
        "GEN",
        "STEPS",
        "LLM",
        "DOUBT",
        "OWNER",
        "LEASE",
        "LAST ACTIVITY",
        "FAILURE",
    )
    lines = _table(header, rows)
    shown = len(listing.runs)
    if listing.next is not None:
        lines.append(
            f"showing {shown} runs, more follow: the same command with --after {listing.next} "
            "lists the next page (--limit 0 lists all)"
        )
    else:
        lines.append(f"{shown} run{'s' if shown != 1 else ''}")
    lines += _waiting_lines(listing)
    parked = [r for r in listing.runs if r.status == "needs_attention"]
    for r in parked:
        seq = f" --seq {r.first_in_doubt}" if r.first_in_doubt is not None else ""
        lines.append(
            f"needs attention: {r.id}: a call in doubt that nothing can tell; `show {r.id}` "
            f"explains, `resolve {r.id}{seq} --confirm JSON | --redo | --fail` decides"
        )
    return _lines(lines)


def _waiting_lines(listing: RunList) -> list[str]:
    """One line per agent whose listed runs wait for a worker: how many, and the longest
    wait. Whether a supervisor serves that agent is not recorded anywhere, so the line says
    what is: a supervisor takes only its own agents' runs, within a poll when it has room."""
    now = listing.now
    assert now is not None
    waits: dict[str, list[tuple[datetime, str]]] = {}
    for r in listing.runs:
        if r.waiting_since is not None:
            waits.setdefault(r.agent, []).append((r.waiting_since, r.id))
    lines = []
    for agent, runs in sorted(waits.items()):
        since, first = min(runs)
        lines.append(
            f"waiting for a worker of agent {agent!r}: {len(runs)} run(s), the longest {first} "
            f"for {relative(since, now).removesuffix(' ago')}; a supervisor takes only the runs "
            f"of its own agents (--agent): if this grows, none serves {agent!r}"
        )
    return lines


def _step_lines(step: Step, now: datetime) -> list[str]:
    gen = "generation"
    if step.tool == "done":
        return [
            f"seq {step.seq}  done: the model had nothing left to do",
            f"       decided   {clock_text(step.decided_at, now)}  {gen} {step.decided_by}"
            f"  llm call {step.llm_call}",
        ]
    replay = f"  [replayed by generation {step.replayed_by}]" if step.replayed_by else ""
    lines = [
        f"seq {step.seq}  {step.tool} {json.dumps(step.args)}{replay}",
        f"       decided   {clock_text(step.decided_at, now)}  {gen} {step.decided_by}"
        f"  llm call {step.llm_call}",
    ]
    if step.intent_at is None:
        lines.append("       intent    none: the tool was never called")
        return lines
    lines.append(
        f"       intent    {clock_text(step.intent_at, now)}  {gen} {step.intent_by}  "
        f"key {step.key}  effect {step.effect or 'keyed'}"
    )
    if step.state == "redo":
        lines.append("       confirm   none: an operator ordered it sent again (redo)")
    elif step.confirmed_at is None:
        lines.append("       confirm   none: IN DOUBT")
    elif step.by_operator:
        result = json.dumps(step.result, sort_keys=True)
        lines.append(
            f"       confirm   {clock_text(step.confirmed_at, now)}  by an operator  "
            f"{step.call_state}  result {result if len(result) <= 80 else result[:77] + '...'}"
        )
    else:
        resent = "  (re-sent under the same key)" if step.resent else ""
        lines.append(
            f"       confirm   {clock_text(step.confirmed_at, now)}  {gen} {step.confirmed_by}"
            f"  result {step.result_text}  remote {step.remote_status}{resent}"
        )
    return lines


OWN_TASK = "- (started without one: the agent's own task)"


def answer_text(output: str | None, status: str) -> str:
    """A run's final answer as ``run`` and ``show`` print it."""
    if output is not None:
        return output
    return "- (the model gave none)" if status == "done" else "- (none yet)"


def format_history(history: RunHistory) -> str:
    run, now = history.run, history.now
    owner = (run.owner or "-") + (" (process gone)" if history.owner_gone else "")
    lines = [
        f"run {run.id}  {run.status}  generation {run.generation}  llm_calls {run.llm_calls}"
        f"  attempts {run.attempts}  agent {run.agent}",
        f"owner    {owner}  lease {_lease_text(run.lease_expires_at, run.owner, now)}",
        f"clock    cr_now() {now.astimezone():%Y-%m-%d} {clock_text(now)} "
        f"{now.astimezone():%Z}; the times below are local",
        f"failure  {run.failure or '-'}",
        f"input    {OWN_TASK if run.input is None else run.input}",
        f"answer   {answer_text(run.output, run.status)}",
        "",
        "steps",
    ]
    if not history.steps:
        lines.append("  none decided yet")
    for step in history.steps:
        lines += ["  " + ln for ln in _step_lines(step, now)]
    lines += ["", "timeline"]
    if not history.events:
        lines.append("  nothing yet")
    for event in history.events:
        lines.append(f"  {clock_text(event.at, now)}  {event.text}")
    lines += ["", "in doubt"]
    lines += [f"  {v}" for v in history.in_doubt] or [
        "  nothing in doubt: every intent has its confirm"
    ]
    if history.attention is not None:
        lines += ["", "needs attention", *_attention_lines(history.attention)]
    if history.cancelled is not None:
        lines += ["", "cancelled", *_cancelled_lines(history.cancelled, now)]
    if history.resolutions:
        lines += ["", "resolved by an operator"]
        lines += [f"  {_resolution_line(r, now)}" for r in history.resolutions]
    if history.retries:
        lines += ["", "retried by an operator"]
        lines += [f"  {_retry_line(r, now)}" for r in history.retries]
    lines += ["", "state"]
    lines += [f"  {n}" for n in history.notes]
    return _lines(lines)


def _cancelled_lines(c: Cancelled, now: datetime) -> list[str]:
    owner = f" ({c.owner})" if c.owner else ""
    fenced = (
        f"generation {c.generation}{owner}, the last to hold the run, is fenced: nothing it "
        "writes or sends after the cancel is accepted"
        if c.generation
        else "no worker had ever claimed the run"
    )
    lines = [f"  at {clock_text(c.cancelled_at, now)}: {c.reason or 'no reason recorded'}"]
    lines.append(f"  {fenced}")
    lines += [f"  {ln}" for call in c.in_flight for ln in _in_flight_lines(call, now)]
    if not c.in_flight:
        lines.append(f"  {nothing_in_flight(c.decided)}")
    return lines


def _in_flight_lines(call: InFlight, now: datetime | None) -> list[str]:
    return [
        f"in flight when cancelled: {call.summary(lambda at: clock_text(at, now))}",
        f"  what to do: {call.advice}",
    ]


def _attention_lines(a: Attention) -> list[str]:
    lines = [
        f"  {a.summary}.",
        f"  args {json.dumps(a.args)}",
        f"  parked by generation {a.parked_by} at {clock_text(a.parked_at)}: "
        f"{a.reason or 'no reason recorded'}",
        "  choose one, from what you know about the remote:",
    ]
    for _, cmd, what in a.choices():
        lines += [f"    {cmd}", f"        {what}"]
    return lines


def _resolution_line(r: PastResolution, now: datetime) -> str:
    why = f" ({r.reason})" if r.reason else ""
    return (
        f"{clock_text(r.resolved_at, now)}  seq {r.seq}  {r.choice}{why}: {r.outcome}; "
        f"parked by generation {r.generation} at {clock_text(r.parked_at, now)} "
        f"({r.effect}, key {r.idem_key})"
    )


def format_attention(a: Attention) -> str:
    """What ``resolve RUN`` prints for a parked run instead of acting."""
    lines = [f"run {a.run_id} needs attention; nothing was sent or changed", *_attention_lines(a)]
    return _lines(lines)


def format_call_resolution(c: CallResolution) -> str:
    past = c.past
    what = {
        "confirm": "confirmed with the result you gave (remote_status operator); the model sees it",
        "redo": "ordered sent again: the next worker sends it once more, under the same key",
        "fail": f"failed ({past.reason or 'no reason given'}); the model sees the failure",
    }[past.choice]
    then = (
        f"  the run stays failed until you retry it: `python -m agent_runtime retry {c.run_id}`; "
        "its next worker finds this call settled"
        if c.status == "failed"
        else "  the run is pending again: the supervisor or `python -m agent_runtime run` "
        "takes it from here"
    )
    return _lines([f"run {c.run_id}: seq {past.seq} (key {past.idem_key}) {what}", then])


def _retry_line(r: PastRetry, now: datetime) -> str:
    was = f"{r.previous_status} since {clock_text(r.previous_since, now)}"
    return (
        f"{clock_text(r.retried_at, now)}  was {was} after {r.previous_attempts} attempt(s): "
        f"{r.previous_failure or 'no reason recorded'}"
    )


def format_resolution(resolution: Resolution) -> str:
    if not resolution.resolved:
        return f"run {resolution.run_id}: nothing in doubt, nothing sent"
    lines = [f"run {resolution.run_id}: {len(resolution.resolved)} intent(s) re-sent"]
    for s in resolution.resolved:
        if s.confirmed_at is None:
            lines.append(f"  seq {s.seq}  key {s.key}  still no confirm")
        else:
            lines.append(
                f"  seq {s.seq}  key {s.key}  result {s.result_text}  remote {s.remote_status}"
            )
    lines += [f"  still in doubt: {v}" for v in resolution.in_doubt]
    return _lines(lines)


def format_cancellation(c: Cancellation) -> str:
    if c.already:
        line = f"run {c.run_id} was already cancelled at {clock_text(c.cancelled_at)}"
    else:
        held = f", held by {c.previous_owner}" if c.previous_owner else ""
        line = (
            f"run {c.run_id} cancelled (was {c.previous_status}, generation "
            f"{c.generation}{held}); its worker changes nothing and sends nothing from its next "
            "write or request on"
        )
    lines = line.split("\n")
    lines += [f"  {ln}" for call in c.in_flight for ln in _in_flight_lines(call, None)]
    if not c.in_flight:
        lines.append(f"  {nothing_in_flight(c.decided)}")
    if c.left_in_doubt:
        lines.append(
            f"  left in doubt, never to be re-sent: {', '.join(c.left_in_doubt)} "
            "(the remote may have acted on them)"
        )
    return _lines(lines)


def format_retry(r: Retry) -> str:
    past = r.past
    if past.previous_status == "failed":
        head = f"run {r.run_id} is pending again (was failed: {past.previous_failure or '-'})"
    else:
        head = (
            f"run {r.run_id} may be claimed now ({r.status}; its last stop: "
            f"{past.previous_failure or '-'})"
        )
    lines = [
        head,
        f"  attempts {past.previous_attempts} -> 0, backoff cleared, give-up clock restarted; "
        "the supervisor or `python -m agent_runtime run` takes it from here",
    ]
    if r.in_doubt:
        lines.append(
            f"  in doubt, re-sent under the same keys by the next owner: {', '.join(r.in_doubt)}"
        )
    key = r.failed_on
    if key is not None:
        seq = key.rpartition(":")[2]
        lines.append(
            f"  it failed on {key}, still in doubt: if the remote refuses it again, the run "
            f"fails the same way; then settle that call (`resolve {r.run_id} --seq {seq} "
            "--confirm JSON` if it acted, `--fail` to give it up) and retry again"
        )
    return _lines(lines)
