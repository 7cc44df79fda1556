"""Subjects for the harness tests: the seed's agent, and variants with one bug each.

Every factory builder returns a fresh ``make_agent`` whose durable stores are keyed by
``ctx.run_id``, as the docs tell users to do.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

from crashresume import Context

JOBS = ["job-1", "job-2", "job-3"]
AFTER = {"run-1", "run-2", "run-3"}  # died right after the effect of job-k
BEFORE = {"run-before-1", "run-before-2", "run-before-3"}  # died right before it

Factory = Callable[[Context], Any]


class MemoryStore:
    """A durable store that lives in the test process (enough for in-process mode)."""

    def __init__(self) -> None:
        self.data: dict[str, Any] = {}

    def load(self, name: str) -> Any:
        return self.data.get(name, ())

    def save(self, name: str, value: Any) -> None:
        self.data[name] = set(value)


class SeedAgent:
    """The seed's example: skip what committed, charge under a stable key, save after."""

    def __init__(self, ctx: Context, store: MemoryStore) -> None:
        self.ctx = ctx
        self.store = store
        self.done = set(store.load("done"))

    def step(self, job: str) -> None:
        if job in self.done:
            return
        self.charge(job)
        self.done.add(job)
        self.store.save("done", self.done)

    def charge(self, job: str) -> Any:
        return self.ctx.effect("charge", job, key=f"charge:{job}")

    def state(self) -> set[str]:
        return set(self.store.load("done"))


class UnkeyedAgent(SeedAgent):
    """Bug: no idempotency key, so a charge re-sent after a crash is charged twice."""

    def charge(self, job: str) -> Any:
        return self.ctx.effect("charge", job)


class SavesFirstAgent(SeedAgent):
    """Bug: marks the job done before charging; a crash in between loses the charge."""

    def step(self, job: str) -> None:
        if job in self.done:
            return
        self.done.add(job)
        self.store.save("done", self.done)
        self.charge(job)


class ForgetfulAgent(SeedAgent):
    """Bug: progress lives only in memory, so a restart starts from nothing."""

    def step(self, job: str) -> None:
        if job not in self.done:
            self.charge(job)
            self.done.add(job)  # never saved

    def state(self) -> set[str]:
        return set(self.done)


def factory(agent: type[SeedAgent] = SeedAgent) -> Factory:
    stores: dict[str, MemoryStore] = {}

    def make_agent(ctx: Context) -> SeedAgent:
        return agent(ctx, stores.setdefault(ctx.run_id, MemoryStore()))

    return make_agent


SEED_STORES: dict[str, MemoryStore] = {}


def make_seed_agent(ctx: Context) -> SeedAgent:
    """A module-level factory, so that rerun hints can name it as MODULE:FACTORY."""
    return SeedAgent(ctx, SEED_STORES.setdefault(ctx.run_id, MemoryStore()))


UNKEYED_STORES: dict[str, MemoryStore] = {}


def make_unkeyed_agent(ctx: Context) -> SeedAgent:
    return UnkeyedAgent(ctx, UNKEYED_STORES.setdefault(ctx.run_id, MemoryStore()))


class SqliteAgent:
    """Durable progress in SQLite: one row per charged job, committed after the charge."""

    KEYED = True

    def __init__(self, ctx: Context, path: Path) -> None:
        self.ctx = ctx
        self.db = sqlite3.connect(path)
        with self.db:
            self.db.execute("CREATE TABLE IF NOT EXISTS done (job TEXT PRIMARY KEY, receipt TEXT)")

    def step(self, job: str) -> None:
        if self.db.execute("SELECT 1 FROM done WHERE job = ?", (job,)).fetchone():
            return
        key = f"charge:{job}" if self.KEYED else None
        receipt = self.ctx.effect("charge", job, key=key)
        with self.db:
            self.db.execute("INSERT INTO done (job, receipt) VALUES (?, ?)", (job, receipt))

    def state(self) -> dict[str, str]:
        return dict(self.db.execute("SELECT job, receipt FROM done"))


class UnkeyedSqliteAgent(SqliteAgent):
    """Bug: the same SQLite agent without an idempotency key."""

    KEYED = False


class FileAgent:
    """Durable progress in an append-only file, flushed and fsynced after each charge."""

    def __init__(self, ctx: Context, path: Path) -> None:
        self.ctx = ctx
        self.path = path
        self.done: dict[str, str] = {}
        if path.exists():
            for line in path.read_text().splitlines():
                job, receipt = line.split(" ")
                self.done[job] = receipt

    def step(self, job: str) -> None:
        if job in self.done:
            return
        self.done[job] = self.ctx.effect("charge", job, key=f"charge:{job}")
        self.record(f"{job} {self.done[job]}\n")

    def record(self, line: str) -> None:
        with self.path.open("a") as progress:
            progress.write(line)
            progress.flush()
            os.fsync(progress.fileno())

    def state(self) -> dict[str, str]:
        return dict(self.done)


class BufferedFileAgent(FileAgent):
    """Bug: progress is buffered in memory and written out only when the agent is collected.

    In-process the old agent is collected before the restart, so the buffer reaches the file
    and every scenario passes; a real process killed mid-run never writes it.
    """

    def __init__(self, ctx: Context, path: Path) -> None:
        super().__init__(ctx, path)
        self.buffer: list[str] = []

    def record(self, line: str) -> None:
        self.buffer.append(line)

    def __del__(self) -> None:
        if self.buffer:
            with self.path.open("a") as progress:
                progress.writelines(self.buffer)


def per_scenario(folder: Path, agent: Callable[[Context, Path], Any], suffix: str) -> Factory:
    """A factory whose durable file is ``folder/<run_id><suffix>``."""

    def make_agent(ctx: Context) -> Any:
        return agent(ctx, folder / f"{ctx.run_id}{suffix}")

    return make_agent


def at(findings: Any) -> set[tuple[str, str]]:
    """The (scenario, kind) pairs of a report's findings."""
    return {(finding.scenario, str(finding.kind)) for finding in findings}


def expect(kind: str, scenarios: set[str]) -> set[tuple[str, str]]:
    return {(scenario, kind) for scenario in scenarios}
