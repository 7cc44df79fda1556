"""The runner's checks: every invariant after every event, and the end state at teardown.

:class:`Checks` is the half of the schedule runner that judges. After every event
:meth:`Checks.check` takes one snapshot and runs the invariants of
:mod:`properties.invariants`, :mod:`properties.shadow` and :mod:`properties.accounting`,
plus those only the runner can judge, because it knows who ran between two snapshots:

- **fenced_act**: a worker whose heartbeat found its run taken over sends nothing more,
  not even a read (:mod:`properties.reads`);
- **stranded**: no lease is extended past the death of its owner;
- **lease_integrity**: between two claims a lease changes only by its owner's hand;
- **claim_truth**: every claim records its reason truthfully, none during a backoff;
- **claim_owner** (:mod:`properties.claimlog`): the claim log names each generation's
  holder;
- **progress** (:mod:`properties.attempts`): a confirm resets its own run's attempts, and
  nothing else moves a run's attempts or progress;
- **parked_acted**: a run that needs attention stays exactly as it was parked (no
  decision, no call, no model answer, no request to any remote, no claim) until an
  operator resolves it;
- **backoff** (:mod:`properties.waits`): a tool's retry comes after one wait of exactly its
  declared backoff for that attempt, and a tool waits only before a retry;
- **landing** (:mod:`properties.waits`): a checked call's wait for its earlier attempts to
  land follows the runtime's rule exactly: waits again only while the clock moved at least
  half the last wait, releases the run (``CallInFlight``) otherwise, never before a wait;
- **activity** (:mod:`properties.activity`): a run's ``updated_at`` keeps up with its
  decisions (record_decision's throttle), after an event that journaled one;
- **asked** (:mod:`properties.questions`, teardown): every question the model was asked
  carries its run's instructions and input.
"""

from __future__ import annotations

from abc import abstractmethod
from datetime import datetime

from agent_runtime.errors import CallInFlight

from . import baseline, invariants, questions, sqlfile
from .activity import activity_truth
from .agents import suite_agents
from .attempts import attempts_truth
from .baseline import Baseline
from .claimlog import claim_owners
from .endings import Endings
from .observe import Snapshot, snapshot
from .pilots import on_another_host
from .reads import desk_reads, fenced_reads
from .remotes import Answer
from .shadow import Shadow
from .violations import Violation, raise_if
from .waits import backoff_truth, landing_truth


class Checks(Endings):
    """The invariants the runner checks; :class:`~properties.runner.ScheduleRunner` applies
    the events between two checks."""

    shadow: Shadow
    gen_before: dict[str, int]
    last: Snapshot | None
    unchanged: Snapshot | None  # the last snapshot, when the events since changed nothing
    previous: Snapshot | None
    claims_seen: set[tuple[str, int]]
    clock_now: datetime
    resolved: set[str]  # runs an operator resolved since the last check
    redone: dict[tuple[str, int], int]  # an operator's redos in this example, by call
    # Answers that were a held request landing (remote, its log's seq): the remote acted on
    # a request sent earlier, by a worker that may be long gone; nobody sent anything now.
    landed: set[tuple[str, int]]
    kinds: dict[str, str]  # each started run's kind
    # each run's workers' model protocols, as configured when each started (None: the
    # agent's own); a configure event may switch a run's protocol between two workers
    spoken: dict[str, set[str | None]]
    orphaned: set[str]  # the claims' owners of supervisors that died (orphan_sweep)
    reads_judged: int | None  # the desk's log seq up to which reads were judged, once fenced

    @abstractmethod
    def baselines(self) -> dict[str, Baseline]:
        """Each started run's crash-free baseline (its kind's)."""

    def _clear_workers(self) -> None:
        super()._clear_workers()
        self.reads_judged = None

    def observe(self) -> Snapshot:
        return snapshot(self.conn, self.remotes)

    def check(self) -> None:
        """The invariants after an event; raises the violations found."""
        now = self.unchanged if self.unchanged is not None else self.observe()
        self.unchanged = None  # every invariant runs either way, on a snapshot that is current
        self.last = now
        self.known = {run: (row.owner, row.generation) for run, row in now.runs.items()}
        found = list(self.problems)
        self.problems.clear()
        found += invariants.no_duplicate_effect(now)
        journaled = [
            (a.run, a.seq) for a in self.asks if a.fate == "journaled" and a.seq is not None
        ]
        unseen = self.shadow.lost_unseen(now, journaled)
        crashed = self.shadow.crashed
        found += self.shadow.check_and_update(now, self.gen_before, self.clock_now)
        for run, seq in [*self.shadow.vanished, *unseen]:  # a crash took the decision back
            for ask in self.asks:
                if (ask.run, ask.seq, ask.fate) == (run, seq, "journaled"):
                    ask.lose("its decision was lost in a database crash", True)
        self.shadow.vanished.clear()
        found += invariants.no_divergence(now, self.asks)
        if len(journaled) != getattr(self, "journaled_seen", 0):  # a decision since
            self.journaled_seen = len(journaled)
            found += activity_truth(self.conn)
        found += invariants.remote_truth(now)
        found += invariants.parked_truth(now)
        found += self._once_sends(now)
        found += self._lease_checks(now)
        found += self._read_checks()
        found += self._claim_checks(now)
        operated = self._operated() | self.resolved
        found += attempts_truth(self.previous, now, crashed=crashed, operated=operated)
        found += claim_owners(self.previous, now)
        found += self._lease_changes(self.previous, now)
        found += self._parked_checks(self.previous, now)
        found += self._wait_checks()
        self.previous = now
        self.moved.clear()
        self.resolved.clear()
        raise_if(found)

    def _operated(self) -> set[str]:
        """The runs an operator changed since the last check (none without operators)."""
        return set()

    def _lease_checks(self, now: Snapshot) -> list[Violation]:
        """Nothing a fenced worker starts, and no lease kept alive past its owner's death."""
        found: list[Violation] = []
        for w in self.workers:
            if w.fenced_after is not None:
                for a in now.answers:
                    after = a.seq > w.fenced_after.get(a.remote, 0)
                    landing = (a.remote, a.seq) in self.landed  # sent before, acted now
                    if after and not landing and a.generation == w.generation and a.run == w.run:
                        found.append(
                            Violation(
                                "fenced_act",
                                w.run,
                                None,
                                f"{w.label} sent {a.key} (answered {a.answer}) after its own "
                                "heartbeat had found the run taken over",
                            )
                        )
                        w.fenced_after[a.remote] = a.seq
            row = now.runs.get(w.run)
            if w.alive or row is None or row.status != "running" or row.owner != w.pilot.owner:
                continue
            if row.generation != w.generation or w.lease_until is None:
                continue
            if row.lease_expires_at is not None and row.lease_expires_at > w.lease_until:
                found.append(
                    Violation(
                        "stranded",
                        w.run,
                        None,
                        f"its owner {w.label} is gone, but its lease was extended to "
                        f"{row.lease_expires_at:%H:%M:%S} past the {w.lease_until:%H:%M:%S} "
                        "its owner last set: nobody else may renew it",
                    )
                )
        return found

    def _read_checks(self) -> list[Violation]:
        """``fenced_act`` for the reads logged since the last check, judged once each by who
        ran meanwhile (:mod:`properties.reads`); nothing is read before a heartbeat fenced
        some worker."""
        fenced = [w.fenced_after.get("desk", 0) for w in self.workers if w.fenced_after is not None]
        if not fenced and self.reads_judged is None:
            return []
        after = min(fenced) if self.reads_judged is None else self.reads_judged
        log = self.remotes.desk_log()
        self.reads_judged = max([after, *(line["seq"] for line in log)])
        reads = [r for r in desk_reads(log) if r.seq > after]
        senders = [w for w in self.workers if w.label in self.moved] if reads else []
        for w in senders:
            self._generation(w)
        return fenced_reads(reads, senders)

    def _lease_changes(self, before: Snapshot | None, now: Snapshot) -> list[Violation]:
        """Between two claims a run's lease changes only by the hand of its owner."""
        found: list[Violation] = []
        if before is None:
            return found
        owners = {w.pilot.owner: w for w in self.workers}
        for run, old in before.runs.items():
            new = now.runs.get(run)
            if new is None or new.generation != old.generation or old.owner is None:
                continue
            same = (new.owner, new.lease_expires_at) == (old.owner, old.lease_expires_at)
            holder = owners.get(old.owner)
            if same or holder is None or holder.label in self.moved:
                continue
            movers = ", ".join(sorted(self.moved)) or "nobody"
            found.append(
                Violation(
                    "lease_integrity",
                    run,
                    None,
                    f"its lease, held by {holder.label} (generation {old.generation}), went from "
                    f"{old.owner} until {old.lease_expires_at} to {new.owner} until "
                    f"{new.lease_expires_at} while only {movers} ran: only the owner may "
                    "renew or let go of its lease",
                )
            )
        return found

    def _claim_checks(self, now: Snapshot) -> list[Violation]:
        """Every claim recorded its reason truthfully (schema.sql, run_claims.reason)."""
        found: list[Violation] = []
        alive = {w.pilot.owner for w in self.workers if w.alive}
        gone = {w.pilot.owner for w in self.workers if w.pilot.gone} | self.orphaned
        before = self.previous.runs if self.previous is not None else {}
        for c in now.claims:
            if (c.run, c.generation) in self.claims_seen:
                continue
            self.claims_seen.add((c.run, c.generation))
            wrong = ""
            prior = before.get(c.run)
            backoff = prior.lease_expires_at if prior is not None and prior.owner is None else None
            if backoff is not None and backoff > self.clock_now:
                wrong = f"took the run during its backoff (claimable from {backoff:%H:%M:%S})"
            elif c.reason == "expired" and not c.lapsed:
                wrong = f"claimed {c.previous_owner}'s lease as expired while it still ran"
            elif c.reason == "owner_dead" and c.previous_owner in alive:
                wrong = f"recorded {c.previous_owner} as proved dead while its worker lives"
            elif c.reason == "owner_dead" and on_another_host(c.previous_owner):
                wrong = (
                    f"recorded {c.previous_owner} as proved dead, yet it ran on another host, "
                    "where no pid of this one proves anything: its lease has to run out"
                )
            elif (
                c.reason == "forced"
                and c.previous_owner in gone
                and not on_another_host(c.previous_owner)
            ):
                wrong = (
                    f"fenced {c.previous_owner} out as if alive, though its process is gone "
                    "(the owner's pid probe must prove it dead)"
                )
            elif c.reason in ("first", "handed_back") and c.previous_owner is not None:
                wrong = f"recorded a claim from {c.previous_owner} as {c.reason}"
            elif (c.reason == "first") != (c.generation == 1):
                wrong = f"recorded {c.reason}: only a run's claim at generation 1 is first"
            if wrong:
                found.append(
                    Violation(
                        "claim_truth", c.run, None, f"generation {c.generation}'s claim {wrong}"
                    )
                )
        return found

    def _parked_checks(self, before: Snapshot | None, now: Snapshot) -> list[Violation]:
        """A parked run does nothing on its own: it stays as it was until resolved."""
        found: list[Violation] = []
        if before is None:
            return found
        for run, old in before.runs.items():
            new = now.runs.get(run)
            if old.status != "needs_attention" or new is None or run in self.resolved:
                continue
            changed = []
            if new.generation != old.generation:
                changed.append(
                    f"it was claimed (generation {old.generation} -> {new.generation}) and is "
                    f"now {new.status}"
                )
            elif new.status != old.status:
                changed.append(f"it went from {old.status} to {new.status}")
            if now.decisions.get(run) != before.decisions.get(run):
                changed.append("its decisions changed")
            if now.calls.get(run) != before.calls.get(run):
                changed.append("its calls changed")
            if now.model_calls.get(run, 0) != before.model_calls.get(run, 0):
                changed.append("the model was asked")
            # a request of an older generation is a zombie's from before the run parked:
            # duplicate_effect, divergence and fenced_act judge those
            sent = self._sent_since(now.answers, run, old.generation)
            if len(sent) != len(self._sent_since(before.answers, run, old.generation)):
                last = sent[-1]
                changed.append(
                    f"a remote answered it ({last.key} by generation {last.generation}: "
                    f"{last.answer})"
                )
            if changed:
                found.append(
                    Violation(
                        "parked_acted",
                        run,
                        None,
                        "the run needs attention and nobody resolved it, yet "
                        + "; ".join(changed)
                        + ": a parked run must not act on its own",
                    )
                )
        return found

    def _once_sends(self, now: Snapshot) -> list[Violation]:
        """**divergence**: a ``once`` call is journaled as sent once by its intent and once
        more by each redo an operator ordered, and never re-sent otherwise (a redo that
        also journaled a re-send's start, ``act``'s ``call.state == "redo"`` as ``>`` or
        ``is``: c257c1d1, 897167dd, passed the suite)."""
        found: list[Violation] = []
        for run, calls in now.calls.items():
            for c in calls.values():
                most = 1 + self.redone.get((run, c.seq), 0)
                if c.effect == "once" and c.sends > most:
                    text = f"the once call {c.key} is journaled as sent {c.sends} times"
                    found.append(Violation("divergence", run, c.seq, f"{text}; at most {most}"))
        return found

    def _wait_checks(self) -> list[Violation]:
        """The backoff of every in-process worker that ran (its waits are recorded)."""
        found: list[Violation] = []
        for w in self.workers:
            log = getattr(w.pilot, "waits", None)
            if log is not None:
                found += backoff_truth(w.label, log, w.settings.run_backoff_cap)
                stopped = getattr(w.pilot, "stopped_with", None)
                released = stopped.retry_after if isinstance(stopped, CallInFlight) else None
                found += landing_truth(w.label, log, released)
        return found

    def _sent_since(self, answers: list[Answer], run: str, generation: int) -> list[Answer]:
        """:func:`_answers_since`, less the landings of requests held since earlier."""
        return [
            a
            for a in _answers_since(answers, run, generation)
            if (a.remote, a.seq) not in self.landed
        ]

    def _settling(self) -> dict[str, Baseline]:
        """The runs the teardown must have finished, each with its baseline: all but those
        a permanent error failed for good (``_check_failed`` saw each fail as it must)."""
        found = sqlfile.rows(self.conn, "statuses") if self.failed_for_good else []
        statuses = {row["id"]: row["status"] for row in found}
        return {
            r: b
            for r, b in self.baselines().items()
            if not (r in self.failed_for_good and statuses.get(r) == "failed")
        }

    def check_final(self) -> None:
        now = self.observe()
        found = list(self.problems)
        self.problems.clear()
        agents = suite_agents(self.remotes.support_url)
        switched = {
            run
            for run, protocols in self.spoken.items()
            if protocols - {None, agents[self.kinds[run]].protocol}
        }
        found += baseline.settled(now, self._settling(), self.asks, switched)
        found += self._wait_checks()
        heard = questions.asked(self.remotes)
        remade = questions.remakes(sqlfile.rows(self.conn, "remade_decisions"))
        found += questions.asked_truly(heard, self.kinds, agents, self.spoken, remade)
        found += questions.used_truly(heard, sqlfile.rows(self.conn, "journaled_answers"))
        for w in self.workers:
            if w.alive:
                found.append(Violation("settled", w.run, None, f"{w.label} is still alive"))
        raise_if(found)


def _answers_since(answers: list[Answer], run: str, generation: int) -> list[Answer]:
    """The remotes' answers to ``run``'s requests by ``generation`` or a later one."""
    return [
        a for a in answers if a.run == run and (a.generation is None or a.generation >= generation)
    ]
