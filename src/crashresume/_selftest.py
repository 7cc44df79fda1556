"""``crashresume --selftest``: a conforming subject and broken ones, each with the findings it
must produce, and nothing else.

Every subject keeps its durable state in a JSON file per scenario (one file per
``ctx.run_id``), so the selftest means the same in-process and in ``mode="process"``.
"""

from __future__ import annotations

import json
import os
import tempfile
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from crashresume._conform import conform
from crashresume._context import Context
from crashresume._errors import CrashResumeError

INPUTS = ("job-1", "job-2", "job-3")
AFTER = ("run-1", "run-2", "run-3")  # died right after the effect of job-k
BEFORE = ("run-before-1", "run-before-2", "run-before-3")  # died right before it
# froze right before / after the effect of job-1, then job-2, then job-3
OVERLAP = tuple(f"run-overlap-{e}{k}" for k in (1, 2, 3) for e in ("before-", ""))
LOST = ("run-lost-1", "run-lost-2", "run-lost-3")  # charge k acted, its answer was lost
SLOW = ("run-slow-1", "run-slow-2", "run-slow-3")  # charge k landed after the caller gave up


class FileStore:
    """One JSON document on disk, replaced atomically on every save."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def load(self) -> dict[str, Any]:
        try:
            data: dict[str, Any] = json.loads(self.path.read_text())
        except FileNotFoundError:
            return {}
        return data

    def save(self, data: dict[str, Any]) -> None:
        scratch = self.path.with_suffix(".tmp")
        scratch.write_text(json.dumps(data))
        os.replace(scratch, self.path)


class Conforming:
    """Skips committed jobs, charges under a stable key, saves after the charge."""

    def __init__(self, ctx: Context, store: FileStore) -> None:
        self.ctx = ctx
        self.store = store
        self.data = store.load()
        self.data.setdefault("done", [])

    def step(self, job: str) -> None:
        if job in self.data["done"]:
            return
        self.charge(job)
        self.data["done"].append(job)
        self.store.save(self.data)

    def charge(self, job: str) -> None:
        self.ctx.effect("charge", job, key=f"charge:{job}")

    def state(self) -> dict[str, Any]:
        return self.store.load()


class FreshKeyPerAttempt(Conforming):
    """Bug: a new idempotency key on every attempt, so a retried charge is a second charge."""

    def charge(self, job: str) -> None:
        self.ctx.effect("charge", job, key=f"charge:{job}:{uuid.uuid4().hex}")


class ForgetsProgress(Conforming):
    """Bug: progress lives only in memory; a restart starts from nothing (keys save the day)."""

    def __init__(self, ctx: Context, store: FileStore) -> None:
        super().__init__(ctx, store)
        self.data = {"done": []}

    def step(self, job: str) -> None:
        if job not in self.data["done"]:
            self.charge(job)
            self.data["done"].append(job)

    def state(self) -> list[str]:  # type: ignore[override]
        return list(self.data["done"])


class CountsTwice(Conforming):
    """Bug: never skips, and bumps a durable counter per job, so a resume counts jobs twice."""

    def step(self, job: str) -> None:
        self.charge(job)
        self.data["processed"] = self.data.get("processed", 0) + 1
        self.store.save(self.data)


class ReusesKey(Conforming):
    """Bug: the retry of a job sends the same key with other arguments (its attempt number)."""

    def step(self, job: str) -> None:
        if job in self.data["done"]:
            return
        attempts = self.data.setdefault("attempts", {})
        attempts[job] = attempts.get(job, 0) + 1
        self.store.save(self.data)
        self.ctx.effect("charge", {"job": job, "attempt": attempts[job]}, key=f"charge:{job}")
        self.data["done"].append(job)
        self.store.save(self.data)

    def state(self) -> dict[str, Any]:
        # Only what is done: the attempt counters rightly differ after a resume.
        return {"done": self.store.load().get("done", [])}


class Nondeterministic(Conforming):
    """Bug: a random request id in the effect's arguments."""

    def charge(self, job: str) -> None:
        arg = {"job": job, "request": uuid.uuid4().hex[:8]}
        self.ctx.effect("charge", arg, key=f"charge:{job}")


class RefusesToResume(Conforming):
    """Bug: marks a job pending before charging, and refuses to start when one is pending."""

    def __init__(self, ctx: Context, store: FileStore) -> None:
        super().__init__(ctx, store)
        if self.data.get("pending"):
            raise RuntimeError(f"found unfinished job {self.data['pending']!r}, giving up")

    def step(self, job: str) -> None:
        if job in self.data["done"]:
            return
        self.data["pending"] = job
        self.store.save(self.data)
        self.charge(job)
        self.data["done"].append(job)
        self.data["pending"] = None
        self.store.save(self.data)


class LeaseLost(Exception):
    """A newer start took the run over: this one must stop."""


class Fencing(Conforming):
    """Takes the run over at every start (a generation in its store) and checks it is still
    the owner before every write, so a start woken after its restart ran changes nothing.

    A file cannot check and write in one step; a database does both in one conditional
    ``UPDATE ... WHERE generation = %s``.
    """

    def __init__(self, ctx: Context, store: FileStore) -> None:
        super().__init__(ctx, store)
        self.generation = self.data.get("generation", 0) + 1
        self.data["generation"] = self.generation
        store.save(self.data)

    def step(self, job: str) -> None:
        if job in self.data["done"]:
            return
        self.charge(job)
        owner = self.store.load().get("generation")
        if owner != self.generation:
            raise LeaseLost(f"generation {owner} owns the run now, not {self.generation}")
        self.data["done"].append(job)
        self.store.save(self.data)

    def state(self) -> dict[str, Any]:
        return {"done": self.store.load().get("done", [])}


class RetriesWithoutKey(Conforming):
    """Bug: a charge that timed out is retried at once, but the retry forgets the key.

    A crash never reaches the retry (a restart replays under the key), so only a fault finds
    it: the remote acted, its answer was lost, and the retry charges a second time.
    """

    def charge(self, job: str) -> None:
        try:
            self.ctx.effect("charge", job, key=f"charge:{job}")
        except (TimeoutError, ConnectionError):
            self.ctx.effect("charge", job)


@dataclass(frozen=True, slots=True, kw_only=True)
class Case:
    """One selftest subject and the exact (scenario, kind) findings it must produce."""

    name: str
    subject: Callable[[Context, FileStore], Any]
    expected: frozenset[tuple[str, str]]
    options: tuple[tuple[str, Any], ...] = ()  # more conform arguments, e.g. faults


def _expect(kind: str, scenarios: Iterable[str]) -> frozenset[tuple[str, str]]:
    return frozenset((scenario, kind) for scenario in scenarios)


CASES = (
    Case(name="conforming agent", subject=Conforming, expected=frozenset()),
    Case(
        name="fresh key per attempt",
        subject=FreshKeyPerAttempt,
        expected=_expect("duplicate_effect", AFTER),
    ),
    Case(
        name="forgets its progress",
        subject=ForgetsProgress,
        expected=_expect("state_lost", ("run-2", "run-3", "run-before-2", "run-before-3")),
    ),
    Case(
        name="resume counts jobs twice",
        subject=CountsTwice,
        expected=_expect("resume_diverged", ("run-2", "run-3", "run-before-2", "run-before-3")),
    ),
    Case(
        name="key reused with other args",
        subject=ReusesKey,
        # After the charge the retry hits the known key with attempt=2; before it, the
        # attempt=2 charge is a new effect and the attempt=1 one never happens.
        expected=_expect("key_conflict", AFTER)
        | _expect("duplicate_effect", BEFORE)
        | _expect("effect_lost", BEFORE),
    ),
    Case(
        name="random id in the arguments",
        subject=Nondeterministic,
        expected=_expect("nondeterministic_baseline", ("run",)),
    ),
    Case(
        name="resume refuses to start",
        subject=RefusesToResume,
        expected=_expect("resume_crashed", AFTER + BEFORE),
    ),
    Case(
        # The conforming subject again, now with its old start woken after its restart ran:
        # it saves its stale progress over the restart's (the last job heals it).
        name="no fencing, old start woken",
        subject=Conforming,
        options=(("scenarios", ("crash", "overlap")),),
        expected=_expect("overlap", OVERLAP[:4]),
    ),
    Case(
        name="fences with a generation",
        subject=Fencing,
        options=(("scenarios", ("crash", "overlap")),),
        expected=frozenset(),
    ),
    Case(
        name="retry without the key, crashes only",
        subject=RetriesWithoutKey,
        expected=frozenset(),
    ),
    Case(
        name="retry without the key, faults too",
        subject=RetriesWithoutKey,
        # The answer lost after the remote acted, or the request landing after the caller
        # gave up: the unkeyed retry is a second charge. A failure before acting is harmless.
        expected=_expect("retry_duplicated", LOST + SLOW),
        options=(("faults", ("lost", "fail", "slow")),),
    ),
)


def _summary(findings: Iterable[tuple[str, str]]) -> str:
    by_kind: dict[str, list[str]] = {}
    for scenario, kind in sorted(findings):
        by_kind.setdefault(kind, []).append(scenario)
    if not by_kind:
        return "no findings"
    return "; ".join(f"{kind} in {' '.join(ids)}" for kind, ids in sorted(by_kind.items()))


def _found(case: Case, mode: str) -> frozenset[tuple[str, str]] | str:
    """The (scenario, kind) pairs conform reports for ``case``, or why it could not run."""
    with tempfile.TemporaryDirectory(prefix="crashresume-selftest-") as folder:

        def make_agent(ctx: Context) -> Any:
            return case.subject(ctx, FileStore(Path(folder) / f"{ctx.run_id}.json"))

        try:
            report = conform(make_agent, inputs=list(INPUTS), mode=mode, **dict(case.options))
        except CrashResumeError as exc:
            return f"{type(exc).__name__}: {exc}"
    return frozenset((finding.scenario, str(finding.kind)) for finding in report.findings)


def run_selftest(
    out: TextIO, *, mode: str = "inprocess", cases: Iterable[Case] | None = None
) -> bool:
    """Run every case (default: ``CASES``), print one block per case, say whether all matched."""
    print(f"crashresume selftest: mode={mode}, inputs {' '.join(INPUTS)}", file=out)
    all_match = True
    count = 0
    for case in CASES if cases is None else cases:
        count += 1
        found = _found(case, mode)
        match = found == case.expected
        all_match = all_match and match
        print(f"{'ok' if match else 'MISMATCH':<9} {case.name}", file=out)
        print(f"{'':<10}expects {_summary(case.expected)}", file=out)
        if isinstance(found, str):
            print(f"{'':<10}could not run: {found}", file=out)
        elif not match:
            missing = case.expected - found
            unexpected = found - case.expected
            if missing:
                print(f"{'':<10}missing {_summary(missing)}", file=out)
            if unexpected:
                print(f"{'':<10}unexpected {_summary(unexpected)}", file=out)
    verdict = "every finding where expected and nowhere else" if all_match else "MISMATCH"
    print(f"{count} subjects: {verdict}", file=out)
    return all_match
