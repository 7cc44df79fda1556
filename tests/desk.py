"""The support agents of ``tests.agents`` as real processes against the mocks under
uvicorn, and what the effect-contract tests read back.

`Desk` runs and crashes them (``CRASH_AT``/``CRASH_SEQ``) and reads the desk's tickets,
deliveries and answers and the journal's calls and run; the fixture `desk` is in
tests/fix_runtime.py. The support plan's steps are `LOOKUP` (read), `TICKET` (keyed),
`EMAIL` (checked, or once) and `FINAL`; `parked` crashes the once agent on its email and
restarts it until the run is parked, the clock past the moment the send could still act.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import httpx

from agent_runtime.errors import EXIT_CRASHED, EXIT_NEEDS_ATTENTION
from agent_runtime.store import clock

from .operator_cli import cli

if TYPE_CHECKING:
    from .fix_runtime import Agent, AgentResult


LOOKUP, TICKET, EMAIL, FINAL = 0, 1, 2, 3  # the support plan's steps
CRASH_FREE_MODEL_CALLS = 4  # three tools, then the final text
IN_DOUBT = ("after_intent", "after_call")  # where a call's outcome is unknown to the journal


@dataclass
class Desk:
    """Agent processes of ``tests.agents`` against the mocks under uvicorn."""

    runner: Agent
    servers: Any
    database_url: str

    def run(self, run_id: str, agent: str = "support", **env: str) -> AgentResult:
        return self.runner.run(
            run_id,
            "run",
            "--agent",
            f"tests.agents:{agent}",
            SUPPORT_URL=self.servers.support_url,
            MODEL_URL=f"{self.servers.model_url}/v1",
            **env,
        )

    def crash(self, run_id: str, point: str, seq: int, agent: str = "support") -> AgentResult:
        first = self.run(run_id, agent, CRASH_AT=point, CRASH_SEQ=str(seq))
        assert first.code == EXIT_CRASHED, first.out
        assert f"CRASH_AT={point} seq={seq}" in first.out
        return first

    def deliveries(self, run_id: str) -> list[dict[str, Any]]:
        return [d for d in self.servers.deliveries() if d["message_id"].startswith(f"{run_id}:")]

    def tickets(self, run_id: str) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = self.servers.tickets(run_id)
        return found

    def answers(self, op: str, ref: str) -> list[str]:
        """What the desk answered every request of ``op`` about ``ref``, in order."""
        response = httpx.get(
            f"{self.servers.support_url}/v1/answers", params={"op": op, "ref": ref}, timeout=10
        )
        response.raise_for_status()
        return [a["answer"] for a in response.json()["answers"]]

    def calls(self, conn: Any, run_id: str) -> list[dict[str, Any]]:
        rows: list[dict[str, Any]] = conn.execute(
            "SELECT seq, idem_key, state, result, remote_status, effect FROM tool_calls"
            " WHERE run_id = %s ORDER BY seq",
            (run_id,),
        ).fetchall()
        return rows

    def status(self, conn: Any, run_id: str) -> dict[str, Any]:
        row: dict[str, Any] = conn.execute(
            "SELECT status, owner, generation, attempts, failure, agent, output,"
            " lease_expires_at, updated_at FROM runs WHERE id = %s",
            (run_id,),
        ).fetchone()
        return row

    def resolve(self, run_id: str, *args: str) -> Any:
        return cli(self.database_url, "resolve", run_id, *args)


def finished(result: AgentResult) -> None:
    """Assert the run finished: exit 0 and a ``done`` line."""
    assert result.code == 0, result.out
    assert result.lines("done"), result.out


def remote_status(result: AgentResult, seq: int) -> str:
    """The remote status the restart's confirm of ``seq`` logged."""
    line = next(ln for ln in result.lines("confirmed") if f" seq={seq} " in f"{ln} ")
    return line.rsplit("remote=", 1)[1].split()[0]


def parked(desk: Desk, conn: Any, run_id: str, point: str) -> AgentResult:
    """Crash the once agent at ``point`` on the email, restart it: it must park."""
    desk.crash(run_id, point, EMAIL, agent="support_once")
    sent = len(desk.deliveries(run_id))
    assert sent == (0 if point == "after_intent" else 1)
    second = desk.run(run_id, "support_once")
    assert second.code == EXIT_NEEDS_ATTENTION, second.out
    assert second.lines("needs-attention"), second.out
    assert f"resolve {run_id} --seq {EMAIL}" in second.out
    run = desk.status(conn, run_id)
    assert (run["status"], run["owner"], run["lease_expires_at"]) == (
        "needs_attention",
        None,
        None,
    )
    call = desk.calls(conn, run_id)[EMAIL]
    assert (call["effect"], call["state"], call["result"]) == ("once", "intent", None)
    assert len(desk.deliveries(run_id)) == sent  # the restart sent nothing
    assert desk.answers("send_email", f"{run_id}:{EMAIL}") == ["delivered"] * sent
    past_landing(conn, run_id)
    return second


def past_landing(conn: Any, run_id: str) -> None:
    """Move the clock past the moment the crashed send could still act (its lands_by): an
    operator's --redo or --fail is refused before it. The clock stops first, so what the
    operator's command finds expired never depends on how fast the machine is."""
    row = conn.execute(
        "SELECT greatest(0, extract(epoch FROM max(lands_by) - cr_now()))::float AS wait"
        " FROM tool_calls WHERE run_id = %s",
        (run_id,),
    ).fetchone()
    clock.freeze(conn)
    clock.advance(conn, row["wait"] + 0.01)
