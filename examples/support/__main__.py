"""``python -m examples.support``: the support agent against the mocks, once, then crashed.

::

    python -m examples.support          # one run: the steps, the answer, the ticket, the email
    python -m examples.support demo     # two real crashes and restarts, checked

It starts the mock model and the mock support desk (state in a temporary directory) and
uses the database the CLI uses (``DATABASE_URL``, else the local cluster under
``CRASHRESUME_HOME``). The plain run drives the agent from Python with a
:class:`~agent_runtime.Worker`; the demo runs it as you would from a shell,
``python -m agent_runtime run --agent examples.support:agent``, and kills it with
``CRASH_AT``/``CRASH_SEQ``.
"""

from __future__ import annotations

import argparse
import logging
import os
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import httpx

from agent_runtime import AgentRuntimeError, Journal, Settings, Worker, logfmt
from agent_runtime.localpg.dbsource import database_url, describe_url
from agent_runtime.store import db
from examples.support import support_agent
from mock_remotes.serve import MockServers, MockStartError, start_mocks

log = logging.getLogger("examples.support")

HELP = """\
The support agent against the mocks: once, or crashed and restarted.

  python -m examples.support          # one run: the steps, the answer, the ticket, the email
  python -m examples.support demo     # two real crashes and restarts, checked

It starts the mock model and the mock support desk (state in a temporary directory) and
uses the database the CLI uses (DATABASE_URL, else the local cluster under
CRASHRESUME_HOME). The plain run drives the agent from Python with a Worker; the demo
runs it as you would from a shell,
  python -m agent_runtime run --agent examples.support:agent
and kills it with CRASH_AT/CRASH_SEQ."""

TASK = "Order A-1001 arrived broken: the mug's handle came off in the box."
AGENT = "examples.support:agent"
TICKET, EMAIL = 1, 2  # the steps: 0 lookup_order, 1 file_ticket, 2 send_email, 3 the answer


def desk(mocks: MockServers, path: str, **params: str) -> list[dict[str, Any]]:
    """A listing of the desk's (tickets, messages, answers), as a test would read it."""
    body = httpx.get(f"{mocks.support_url}/v1/{path}", params=params, timeout=10).json()
    found: list[dict[str, Any]] = body[path]
    return found


def answer_of(url: str, run_id: str) -> str | None:
    with db.connection(url) as conn:
        return Journal(conn).require_run(run_id).output


def run_once(url: str, mocks: MockServers, task: str) -> int:
    run_id = f"support-{uuid.uuid4().hex[:6]}"
    settings = Settings(database_url=url, model_url=f"{mocks.model_url}/v1")
    worker = Worker.open(settings, url, agents=support_agent(mocks.support_url))
    try:
        outcome = worker.run(run_id, input=task)
    finally:
        worker.close()
    print(f"\nrun      {run_id}: {outcome.steps} tool calls, {outcome.llm_calls} model answers")
    print(f"answer   {outcome.output}")
    for ticket in desk(mocks, "tickets", run=run_id):
        print(f"ticket   {ticket['id']} under key {ticket['key']}: {ticket['args']['summary']}")
    for mail in desk(mocks, "messages", run=run_id):
        print(f"email    {mail['id']} to {mail['to']}: {mail['subject']}")
    print(f"\nthe journal keeps the run: python -m agent_runtime show {run_id}", flush=True)
    return 0


def agent_process(run_id: str, env: dict[str, str], crash: tuple[str, int] | None) -> list[str]:
    """One ``python -m agent_runtime run`` of the agent, shown and echoed; its lines."""
    child = {**env, "RUN_ID": run_id}
    command = ["run", "--agent", AGENT]
    shown = f"RUN_ID={run_id} python -m agent_runtime run --agent {AGENT}"
    if crash is not None:  # the first process starts the run; the restart resumes it
        child.update(CRASH_AT=crash[0], CRASH_SEQ=str(crash[1]))
        command += ["--input", TASK]
        shown = f"CRASH_AT={crash[0]} CRASH_SEQ={crash[1]} {shown} --input {TASK!r}"
    print(f"\n$ {shown}", flush=True)
    proc = subprocess.run(
        [sys.executable, "-m", "agent_runtime", *command],
        env=child,
        capture_output=True,
        text=True,
        timeout=120,
    )
    lines = [line for line in (proc.stdout + proc.stderr).splitlines() if line.strip()]
    for line in lines:
        print("  " + line)
    print(f"  (exit code {proc.returncode})", flush=True)
    lines.append(f"exit={proc.returncode}")
    return lines


def has(lines: list[str], *needles: str) -> bool:
    return any(all(needle in line for needle in needles) for line in lines)


@dataclass(frozen=True)
class Leg:
    """A run killed at a crash point and restarted, and what the desk saw of one key."""

    first: list[str]  # the killed process's lines
    second: list[str]  # the restart's lines
    before: list[dict[str, Any]]  # the desk's listing for the key before the restart
    after: list[dict[str, Any]]  # and after it
    asked: list[str]  # every answer the desk gave about the key, in order


def crash_and_restart(
    run_id: str, env: dict[str, str], mocks: MockServers, crash: tuple[str, int], listing: str
) -> Leg:
    key = f"{run_id}:{crash[1]}"
    params = {"run": run_id} if listing == "tickets" else {"message_id": key}
    first = agent_process(run_id, env, crash)
    before = desk(mocks, listing, **params)
    query = "&".join(f"{name}={value}" for name, value in params.items())
    print(f"  before the restart the desk's GET /v1/{listing}?{query} lists {len(before)}")
    second = agent_process(run_id, env, None)
    asked = [a["answer"] for a in desk(mocks, "answers", ref=key)]
    print(f"  what the desk answered about {key}: {', '.join(asked)}")
    return Leg(first, second, before, desk(mocks, listing, **params), asked)


def ticket_after_intent(
    run_id: str, url: str, env: dict[str, str], mocks: MockServers
) -> list[str]:
    """Dies after the ticket's intent is journaled, before the desk hears of it."""
    key = f"{run_id}:{TICKET}"
    leg = crash_and_restart(run_id, env, mocks, ("after_intent", TICKET), "tickets")
    problems = []
    if "exit=1" not in leg.first or leg.before:
        problems.append("ticket: the first process did not die before filing the ticket")
    if not has(leg.second, "resending", f"key={key}", "effect=keyed"):
        problems.append(f"ticket: the restart did not re-send the intent under {key}")
    if (
        not has(leg.second, "confirmed", f"key={key}", "remote=created")
        or "exit=0" not in leg.second
    ):
        problems.append("ticket: the re-sent ticket was not filed, or the run did not finish")
    if [t["key"] for t in leg.after] != [key] or leg.asked != ["created"]:
        problems.append(f"ticket: expected one ticket, filed once under {key}; got {leg.asked}")
    print(f"  answer: {answer_of(url, run_id)}")
    return problems


def email_after_call(run_id: str, url: str, env: dict[str, str], mocks: MockServers) -> list[str]:
    """Dies after the desk delivered the email, before the journal heard of it."""
    key = f"{run_id}:{EMAIL}"
    leg = crash_and_restart(run_id, env, mocks, ("after_call", EMAIL), "messages")
    problems = []
    if "exit=1" not in leg.first or len(leg.before) != 1:
        problems.append("email: the first process did not die right after the delivery")
    if not has(leg.second, "confirmed", f"key={key}", "remote=found") or "exit=0" not in leg.second:
        problems.append("email: the restart did not confirm the delivery its check found")
    if len(leg.after) != 1 or leg.asked != ["delivered", "present"]:
        problems.append(f"email: expected one delivery and one check, got {leg.asked}")
    print(f"  answer: {answer_of(url, run_id)}")
    return problems


def demo(url: str, mocks: MockServers) -> int:
    unset = ("CRASH_AT", "CRASH_SEQ", "RUN_ID", "MODEL_PROTOCOL", "MODEL_NAME")
    env = {k: v for k, v in os.environ.items() if k not in unset}
    env.update(DATABASE_URL=url, MODEL_URL=f"{mocks.model_url}/v1", SUPPORT_URL=mocks.support_url)
    # A checked send's restart waits until the first send can no longer land (its start plus
    # TOOL_TIMEOUT plus IN_FLIGHT_MARGIN, 15 s by default) before it asks the desk; the
    # desk here answers at once, so the demo keeps that bound short.
    env.setdefault("TOOL_TIMEOUT", "2")
    env.setdefault("IN_FLIGHT_MARGIN", "1")
    print(f"\nevery agent process below runs with MODEL_URL={env['MODEL_URL']}")
    print(f"SUPPORT_URL={mocks.support_url} DATABASE_URL={describe_url(url)}")
    runs = [f"support-{leg}-{uuid.uuid4().hex[:6]}" for leg in ("ticket", "email")]
    problems = ticket_after_intent(runs[0], url, env, mocks)
    problems += email_after_call(runs[1], url, env, mocks)
    if problems:
        print("\nNOT AS PROMISED:\n" + "\n".join(f"  - {p}" for p in problems))
        return 1
    print("\nsummary")
    print("  file_ticket (keyed), died after its intent: the restart re-sent it under the")
    print("              same key and the desk filed one ticket")
    print("  send_email (checked), died after the delivery: the restart asked the desk only once")
    print("              the first send could no longer land (awaiting-landing, if it was")
    print("              still early), found the delivery, confirmed it and sent nothing:")
    print("              one email")
    print("\nthe runs stay in the journal; look at them with")
    for run_id in runs:
        print(f"  python -m agent_runtime show {run_id}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m examples.support",
        description=HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "command",
        nargs="?",
        choices=("run", "demo"),
        default="run",
        help="run: one run, its steps and answer (default); demo: two crashes and restarts",
    )
    parser.add_argument("--input", default=TASK, help="the customer's message (run only)")
    args = parser.parse_args(argv)
    logfmt.install()
    try:
        url = database_url(Settings(database_url=os.environ.get("DATABASE_URL") or None))
        with (
            tempfile.TemporaryDirectory(prefix="support-mocks-") as data,
            start_mocks(data, support=True) as mocks,
        ):
            return demo(url, mocks) if args.command == "demo" else run_once(url, mocks, args.input)
    except AgentRuntimeError as exc:  # one line, as the CLI says it; never a traceback
        if not exc.reported:
            log.error("%s error=%r", type(exc).__name__, str(exc))
        return exc.exit_code
    except MockStartError as exc:
        log.error("MockStartError error=%r", str(exc))
        return 4


if __name__ == "__main__":
    sys.exit(main())
