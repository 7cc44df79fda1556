"""Who a worker says it is, and what it says it replayed, hold to the journal.

- **claim_owner** (``driving._check_adopted``): a worker started on a lease claimed for it
  puts its own token on it before its first gate. ``Worker.run``'s ``lease.owner !=
  self.owner`` as ``>`` (de933ca4) adopted only when the tokens sorted one way: the run
  stayed under the supervisor's token, whose live pid no dead worker's can disprove.
- **replayed** (``logged._replayed_only_earlier``): a ``replayed`` line names a decision an
  earlier generation journaled. ``_drive``'s ``!=`` as ``<=`` (5a5b367f) said it replayed
  its own parallel answer's second call.
- **renewal** (``driving._beat``): a live owner's beat renews its lease unless its database
  went away. ``Heartbeat.beat``'s ``if self.lost.is_set()`` negated (e9b8b743) renewed
  nothing ever: the suite took it for a slow worker and swept its runs. And a beat that
  fails raises nothing (``except AgentRuntimeError`` narrowed: 95edb702; the ``db_crash``
  story now beats before the crash and after it, on the connection the crash broke).
"""

from __future__ import annotations

import pytest

from agent_runtime.loop import lease, worker
from agent_runtime.loop.lease import Heartbeat
from agent_runtime.loop.worker import Worker

from .planting import caught_with_edit
from .runners import InProcessRunner
from .scope import story

ADOPT = "if lease.owner != self.owner:"
REPLAYED = "and journaled.generation != lease.generation:"


def test_a_worker_that_keeps_its_claimers_token_is_caught(
    runner: InProcessRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Never adopting (``==`` for ``!=``: what ``>`` does whenever the worker's token sorts
    after its claimer's, as it does or not by the two pids' digits)."""
    found = caught_with_edit(
        runner,
        story("provisioning", "overtaken", "after_intent", 1),
        monkeypatch,
        (worker, ADOPT, ADOPT.replace("!=", "==")),
        take="Worker.run",
        put=(Worker, "run"),
    )

    assert "[claim_owner] run r0: w2 works on the lease claimed for it at generation 2" in found


def test_a_worker_that_says_it_replayed_its_own_decision_is_caught(
    runner: InProcessRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    found = caught_with_edit(
        runner,
        story("parallel", "crash", "before_decide", 0),
        monkeypatch,
        (worker, REPLAYED, REPLAYED.replace("!=", "<=")),
        take="Worker._drive",
        put=(Worker, "_drive"),
    )

    assert "[replayed] run r0 step 2: a worker logged `replayed` for the decision" in found


def test_a_heartbeat_that_renews_nothing_is_caught(
    runner: InProcessRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    old = "        if self.lost.is_set():\n            return None"
    found = caught_with_edit(
        runner,
        story("provisioning", "outpaced", "after_intent", 1),
        monkeypatch,
        (lease, old, old.replace("if self", "if not self")),
        take="Heartbeat.beat",
        put=(Heartbeat, "beat"),
    )

    assert "[renewal] run r0: w1's heartbeat beat and renewed nothing" in found


def test_a_heartbeat_that_lets_a_failed_beat_escape_is_caught(
    runner: InProcessRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    old = '        except AgentRuntimeError as exc:\n            log.warning("heartbeat-failed'
    found = caught_with_edit(
        runner,
        story("provisioning", "db_crash", "after_intent", 1),
        monkeypatch,
        (lease, old, old.replace("AgentRuntimeError", "KeyError")),
        take="Heartbeat.beat",
        put=(Heartbeat, "beat"),
    )

    assert "[renewal] run r0: w1's heartbeat raised DatabaseError" in found
