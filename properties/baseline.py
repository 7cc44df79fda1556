"""The crash-free baselines (one per kind of run), the end-state check against them, and
the outcome two runners must agree on.

**settled** (teardown): every started run is done; its tools are its kind's baseline's in
order; its arguments equal the baseline's up to the call numbers the mock model writes
(``srv-3``, ``(#3)``) and the ids they refer to; every tool step is confirmed and every
effectful one matched by exactly one effect at its remote (nothing lost); no model answer
is left in flight; its output (the final answer's text) is exactly the text of the answer
journaled for its final decision, and the baseline's up to those call numbers and ids.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Set
from dataclasses import dataclass
from typing import Any, Final

from .accounting import Ask
from .observe import KIND_OF, RunRow, Snapshot
from .violations import Violation

_NUMBER: Final = re.compile(r"-(\d+)")
_CALL_NUMBER: Final = re.compile(r"\(#\d+\)")  # the support plan's "(#3)"
_TICKET: Final = re.compile(r"\bT-\d+\b")  # a ticket id the desk handed out
_HASH_NUMBER: Final = re.compile(r"#\d+")  # a final text's "(call #4)", "(#4)"


@dataclass(frozen=True, kw_only=True)
class Baseline:
    """The crash-free run: its tools in order and its arguments, normalised."""

    tools: tuple[str, ...]
    args: tuple[dict[str, Any], ...]
    output: str | None = None  # the final answer's text, normalised (None: it has none)


def normalised(args: dict[str, Any]) -> dict[str, Any]:
    """Arguments with call numbers and the ids they refer to replaced by placeholders."""
    out = dict(args)
    if "name" in out:
        out["name"] = _NUMBER.sub("-N", str(out["name"]))
    if "server_id" in out:
        out["server_id"] = "<server id>"
    if out.get("type") == "A" and "value" in out:
        out["value"] = "<server ip>"
    for field in ("summary", "subject", "body"):
        if isinstance(out.get(field), str):
            out[field] = _TICKET.sub("T-N", _CALL_NUMBER.sub("(#N)", out[field]))
    return out


def normalised_output(text: str | None) -> str | None:
    """A final answer's text with the call numbers the mock model writes (``#4``) and the
    ids and names they refer to (``srv-0000002``, ``app-4.example.test``, ``T-0000001``)
    replaced by placeholders: a crash may cost a model call, which shifts them."""
    return None if text is None else _NUMBER.sub("-N", _HASH_NUMBER.sub("#N", text))


def given_up(now: Snapshot, run: str, seq: int) -> bool:
    """Whether an operator failed the call (``resolve --fail``), or the runtime refused it
    (a spoiled answer: an unknown tool, invalid arguments; never sent): the model then
    decides anew, so the step is not the crash-free run's."""
    call = now.calls.get(run, {}).get(seq)
    return call is not None and (call.state, call.remote_status) in SET_ASIDE


SET_ASIDE: Final = frozenset({("failed", "operator"), ("failed", "rejected")})


def baseline_of(now: Snapshot, run: str) -> Baseline:
    steps = sorted(now.decisions.get(run, {}))
    decisions = [now.decisions[run][s] for s in steps if not given_up(now, run, s)]
    row = now.runs.get(run)
    return Baseline(
        tools=tuple(d.tool for d in decisions),
        args=tuple(normalised(d.args) for d in decisions),
        output=None if row is None else normalised_output(row.output),
    )


def settled(
    now: Snapshot,
    baselines: dict[str, Baseline],
    asks: list[Ask],
    switched: Set[str] = frozenset(),
) -> list[Violation]:
    """``baselines``: each started run's crash-free baseline (its kind's); ``switched``:
    the runs a deployment switched to another protocol than their agent's (a final answer
    of Chat Completions has a text, the seed's ``decide`` none: their output is held to
    their journal alone)."""
    found: list[Violation] = []
    for run, baseline in baselines.items():
        row = now.runs.get(run)
        if row is None or row.status != "done":
            status = "missing" if row is None else f"{row.status} ({row.failure or 'no reason'})"
            found.append(Violation("settled", run, None, f"never finished: {status}"))
            continue
        mine = baseline_of(now, run)
        got, want = _steps(mine), _steps(baseline)
        if any(given_up(now, run, seq) for seq in now.decisions.get(run, {})):
            # the model decided anew after a refused or failed call, and the rest of that
            # answer went on without it: the same steps, not necessarily in the same order
            got, want = sorted(got, key=_order), sorted(want, key=_order)
        if [t for t, _ in got] != [t for t, _ in want]:
            found.append(
                Violation(
                    "settled",
                    run,
                    None,
                    f"finished with tools {[t for t, _ in got]}, the crash-free run with "
                    f"{[t for t, _ in want]}",
                )
            )
            continue
        for seq, ((tool, mine_args), (_, want_args)) in enumerate(zip(got, want, strict=True)):
            # a final answer's arguments are journaled as the model gave them (a spoiled
            # one's too) and act on nothing: its text, the output, is compared below
            if mine_args != want_args and tool != "done":
                found.append(
                    Violation(
                        "settled", run, seq, f"arguments {mine_args}, crash-free run {want_args}"
                    )
                )
        found += _output(run, row, mine, None if run in switched else baseline)
        calls = now.calls.get(run, {})
        held = {row.key: row for row in now.effects_of(run)}
        expected_keys = set()
        for seq, d in sorted(now.decisions[run].items()):
            if d.tool == "done" or given_up(now, run, seq):
                continue
            call = calls.get(seq)
            if call is None or call.state != "confirmed":
                found.append(
                    Violation(
                        "settled", run, seq, f"{d.tool} is {call.state if call else 'not called'}"
                    )
                )
            elif d.tool not in KIND_OF:
                continue
            elif call.key not in held:
                found.append(
                    Violation(
                        "settled", run, seq, f"effect lost: nothing at the remote under {call.key}"
                    )
                )
            else:
                expected_keys.add(call.key)
        if set(held) - expected_keys:
            found.append(
                Violation(
                    "settled",
                    run,
                    None,
                    f"the remotes hold keys {sorted(held)}, the journal confirmed effects under "
                    f"{sorted(expected_keys)}",
                )
            )
    for ask in asks:
        if ask.fate == "pending":
            found.append(
                Violation(
                    "settled",
                    ask.run,
                    ask.seq,
                    f"model call #{ask.number} is still held by {ask.worker} after teardown",
                )
            )
    return found


def outcome(now: Snapshot, runs: list[str]) -> dict[str, Any]:
    """What two runners must agree on for the same schedule (the differential test)."""
    out: dict[str, Any] = {}
    for run in runs:
        row = now.runs.get(run)
        out[run] = {
            "status": None if row is None else row.status,
            "llm_calls": None if row is None else row.llm_calls,
            "model_calls": now.model_calls.get(run, 0),
            "decisions": [
                [d.seq, d.tool, d.args] for _, d in sorted(now.decisions.get(run, {}).items())
            ],
            "calls": [
                [c.seq, c.key, c.state, c.remote_status, (c.result or {}).get("id")]
                for _, c in sorted(now.calls.get(run, {}).items())
            ],
            "effects": [[r.key, r.kind, r.id, r.args] for r in now.effects_of(run)],
        }
    out["resources"] = dict(sorted(Counter(r.kind for r in now.effects).items()))
    return out


def _output(run: str, row: RunRow, mine: Baseline, baseline: Baseline | None) -> list[Violation]:
    """A done run's output is its final answer's text: exactly the text of the answer
    journaled for its final decision, and the crash-free run's up to call numbers and ids."""
    found: list[Violation] = []
    if row.output != row.final_text:
        found.append(
            Violation(
                "settled",
                run,
                None,
                f"finished with output {row.output!r}, but the final answer journaled for it "
                f"says {row.final_text!r}: a run's output is its final answer's text",
            )
        )
    if baseline is not None and mine.output != baseline.output:
        found.append(
            Violation(
                "settled",
                run,
                None,
                f"finished with output {row.output!r}, the crash-free run with "
                f"{baseline.output!r} (call numbers and ids aside)",
            )
        )
    return found


def _steps(baseline: Baseline) -> list[tuple[str, dict[str, Any]]]:
    return list(zip(baseline.tools, baseline.args, strict=True))


def _order(step: tuple[str, dict[str, Any]]) -> tuple[str, str]:
    return step[0], json.dumps(step[1], sort_keys=True, default=str)
