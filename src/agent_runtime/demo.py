"""``python -m agent_runtime demo``: two real crashes, two real restarts, checked.

It starts (or reuses) the local PostgreSQL and both mocks, then for each of
``after_call`` and ``after_decide`` runs an agent process that dies with
``os._exit(1)`` at step 0, restarts it on the same run, and checks what the seed
promises: the server exists in the cloud before the restart, the re-sent call
answers ``already_done`` and no second server exists; the replayed decision keeps
its name and ``llm_calls`` does not move. The mocks are stopped at the end; only
the documented persistent database stays up, and the demo names the ``runs`` and
``show`` commands that read its runs back from it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from typing import Any

import httpx

from agent_runtime.localpg import dbsource

SCENARIOS = ("after_call", "after_decide")


@dataclass(frozen=True, kw_only=True)
class Leg:
    code: int
    lines: list[str]


def _agent(run_id: str, env: dict[str, str], crash_at: str | None) -> Leg:
    child_env = {**env, "RUN_ID": run_id}
    child_env.pop("CRASH_AT", None)
    child_env.pop("CRASH_SEQ", None)
    shown = f"RUN_ID={run_id} python -m agent_runtime"
    if crash_at:
        child_env.update(CRASH_AT=crash_at, CRASH_SEQ="0")
        shown = f"CRASH_AT={crash_at} CRASH_SEQ=0 " + shown
    print(f"\n$ {shown}", flush=True)
    proc = subprocess.run(
        [sys.executable, "-m", "agent_runtime", "run"],
        env=child_env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    lines = [
        ln for ln in (proc.stderr + proc.stdout).splitlines() if ln.strip()
    ]  # log, then outcome
    for line in lines:
        if "schema-applied" not in line:
            print("  " + line)
    print(f"  (exit code {proc.returncode})", flush=True)
    return Leg(code=proc.returncode, lines=lines)


def _resources(cloud_url: str, run_id: str) -> dict[str, Any]:
    body: dict[str, Any] = httpx.get(f"{cloud_url}/v1/resources", params={"run": run_id}).json()
    return body


def _model_calls(model_url: str, run_id: str) -> int:
    return int(httpx.get(f"{model_url}/v1/calls/{run_id}").json()["calls"])


def _find(lines: list[str], *needles: str) -> str | None:
    return next((ln for ln in lines if all(n in ln for n in needles)), None)


def _scenario(
    point: str, run_id: str, env: dict[str, str], cloud_url: str, model_url: str
) -> list[str]:
    """Run one crash and restart; return what did not hold (empty: all held)."""
    problems: list[str] = []
    first = _agent(run_id, env, point)
    if first.code != 1 or not _find(first.lines, f"CRASH_AT={point}"):
        problems.append(f"{point}: the first process did not die at {point} (exit {first.code})")
    servers_after_crash = _resources(cloud_url, run_id)["counts"]["servers"]
    calls_after_crash = _model_calls(model_url, run_id)
    if point == "after_call":  # the journal has no confirm for step 0; the cloud has the server
        servers = f"{servers_after_crash} server" + ("" if servers_after_crash == 1 else "s")
        print(
            f"  before the restart the cloud holds {servers} for run {run_id}: it acted, "
            "and the crash lost only its answer",
            flush=True,
        )
    second = _agent(run_id, env, None)
    after = _resources(cloud_url, run_id)
    if second.code != 0 or not _find(second.lines, "done", "steps=3"):
        problems.append(f"{point}: the restart did not finish the run (exit {second.code})")
    if after["total"] != 3:
        problems.append(f"{point}: expected 3 resources, the cloud holds {after['total']}")
    if point == "after_call":
        if not _find(second.lines, "confirmed", "seq=0", "remote=already_done"):
            problems.append("after_call: the re-sent call was not answered already_done")
        if servers_after_crash != 1 or after["counts"]["servers"] != 1:
            problems.append(
                f"after_call: servers {servers_after_crash} after the crash, "
                f"{after['counts']['servers']} after the restart (expected 1 and 1)"
            )
    else:
        decided = _find(first.lines, "decided", "seq=0")
        replayed = _find(second.lines, "replayed", "seq=0")
        if not decided or not replayed or '"srv-1"' not in decided or '"srv-1"' not in replayed:
            problems.append("after_decide: step 0 was not replayed under its first name srv-1")
        if calls_after_crash != 1 or _model_calls(model_url, run_id) != 4:
            problems.append(
                f"after_decide: the model was asked {calls_after_crash} time(s) before the "
                f"restart and {_model_calls(model_url, run_id)} in all (expected 1 and 4)"
            )
    return problems


def run_demo() -> int:
    from mock_remotes.serve import start_mocks

    home = dbsource.default_home()
    started = time.monotonic()
    url = os.environ.get("DATABASE_URL") or dbsource.cli_database_url(home)
    print(f"database: {dbsource.describe_url(url)} (stop it with: python -m agent_runtime db stop)")
    mocks = start_mocks(home / "mocks")
    try:
        env = {
            **os.environ,
            "DATABASE_URL": url,
            "CLOUD_URL": mocks.cloud_url,
            "MODEL_URL": mocks.model_url,
        }
        problems: list[str] = []
        run_ids = [f"demo-{point.replace('_', '-')}-{uuid.uuid4().hex[:6]}" for point in SCENARIOS]
        for point, run_id in zip(SCENARIOS, run_ids, strict=True):
            problems += _scenario(point, run_id, env, mocks.cloud_url, mocks.model_url)
    finally:
        mocks.stop()
    if problems:
        print("\nNOT AS PROMISED:")
        for p in problems:
            print("  - " + p)
        return 1
    print("\nsummary")
    print("  after_call:   the server was built once; the restart re-sent key <run>:0 and the")
    print("                cloud answered already_done; 3 resources in all")
    print("  after_decide: step 0 was replayed from the journal as srv-1; the model was asked")
    print("                4 times for the whole run, as without a crash")
    print(f"  all promises held in {time.monotonic() - started:.1f}s")
    _print_next_steps(run_ids)
    return 0


def _print_next_steps(run_ids: list[str]) -> None:
    """The operator commands that show what the demo's runs left in the journal."""
    print("\nthe runs stay in the journal; look at them with")
    print("  python -m agent_runtime runs")
    for run_id in run_ids:
        print(f"  python -m agent_runtime show {run_id}")
