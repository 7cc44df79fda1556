"""scenarios=["overlap"]: the first start frozen at a boundary while its restart runs."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from crashresume import Context, UsageError, conform, current_context
from crashresume._selftest import INPUTS, Conforming, Fencing, FileStore

from .subjects import UnkeyedAgent, at, expect, factory

MODES = [
    "inprocess",
    pytest.param(
        "process",
        marks=pytest.mark.skipif(not hasattr(os, "fork"), reason="process mode needs os.fork"),
    ),
]
STALE = {"run-overlap-before-1", "run-overlap-1", "run-overlap-before-2", "run-overlap-2"}


def _files(folder: Path, subject: Any) -> Any:
    def make_agent(ctx: Context) -> Any:
        return subject(ctx, FileStore(folder / f"{ctx.run_id}.json"))

    return make_agent


@pytest.mark.parametrize("mode", MODES)
def test_a_woken_start_that_does_not_fence_is_reported_with_who_did_what_in_order(
    mode: str, tmp_path: Path
) -> None:
    report = conform(
        _files(tmp_path, Conforming), list(INPUTS), mode=mode, scenarios=["crash", "overlap"]
    )

    assert at(report.findings) == expect("overlap", STALE)
    assert report.scenarios[6:] == [
        f"run-overlap-{edge}{k}" for k in (1, 2, 3) for edge in ("before-", "")
    ]
    [finding] = [f for f in report.findings if f.scenario == "run-overlap-before-2"]
    assert finding.message.startswith(
        "the first run froze right before effect call 2 while stepping input 2 of 3 "
        "('job-2'); in order: the first run made charge('job-1'); resume 1 ran while it was "
        "frozen and made charge('job-2'), charge('job-3'); the first run, woken, made no new "
        "effect; state() was {'done': ['job-1', 'job-2', 'job-3']} when resume 1 ended and "
        "{'done': ['job-1', 'job-2']} once the woken run finished: it overwrote what its "
        "restart had written"
    )
    assert finding.rerun.endswith(
        "only='run-overlap-before-2'" + (", mode='process')" if mode == "process" else ")")
    )
    assert "froze right before effect call 2, its restart ran" in str(report)


@pytest.mark.parametrize("mode", MODES)
def test_a_subject_that_fences_with_a_generation_passes(mode: str, tmp_path: Path) -> None:
    report = conform(
        _files(tmp_path, Fencing), list(INPUTS), mode=mode, scenarios=["crash", "overlap"]
    )

    assert report.passed, str(report)
    assert len(report.scenarios) == 12


def test_a_woken_start_that_sends_without_a_key_is_a_duplicate_and_an_overlap() -> None:
    report = conform(factory(UnkeyedAgent), list(INPUTS), scenarios="overlap")

    before_2 = {(f.kind, f.scenario): f for f in report.findings}
    assert ("overlap", "run-overlap-before-2") in before_2
    assert "the first run, woken, made charge('job-2')" in (
        before_2["overlap", "run-overlap-before-2"].message
    )
    assert before_2["duplicate_effect", "run-overlap-before-2"].message == (
        "charge('job-2') happened 2 times, once in the baseline"
    )
    assert report.scenarios == [
        f"run-overlap-{edge}{k}" for k in (1, 2, 3) for edge in ("before-", "")
    ]


class Witness(Conforming):
    """Writes its pid at start; a restart writes what /proc says of every earlier start."""

    def __init__(self, ctx: Context, store: FileStore) -> None:
        super().__init__(ctx, store)
        pids = store.path.with_suffix(".pids")
        if pids.exists():
            states = []
            for pid in pids.read_text().split():
                stat = Path(f"/proc/{pid}/stat").read_text()
                states.append(stat.rsplit(")", 1)[1].split()[0])
            store.path.with_suffix(".seen").write_text(" ".join(states))
        with pids.open("a") as out:
            out.write(f"{os.getpid()}\n")


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")
def test_with_mode_process_the_old_start_is_a_stopped_process_while_its_restart_runs(
    tmp_path: Path,
) -> None:
    conform(_files(tmp_path, Witness), list(INPUTS), mode="process", only="run-overlap-2")

    # The restart saw its predecessor stopped (T), not dead and not running.
    assert (tmp_path / "run-overlap-2.seen").read_text() == "T"


def test_only_reruns_one_overlap_scenario(tmp_path: Path) -> None:
    report = conform(_files(tmp_path, Conforming), list(INPUTS), only="run-overlap-2")

    assert report.scenarios == ["run-overlap-2"]
    assert at(report.findings) == {("run-overlap-2", "overlap")}


@pytest.mark.parametrize(
    ("options", "advice"),
    [
        ({"scenarios": "nap"}, r"scenarios='nap': 'nap' is not a scenario kind; use 'crash'"),
        ({"scenarios": []}, r"scenarios=\[\]: no scenario kind given; use 'crash'"),
        ({"scenarios": 3}, r"scenarios=3: use 'crash' \(die at each boundary"),
        (
            {"scenarios": "overlap", "explore": "hypothesis"},
            "repeat= and scenarios= shape the exhaustive plan",
        ),
        ({"only": "run-overlap-9"}, "names effect call 9, but the baseline made 3"),
    ],
)
def test_bad_scenario_kinds_are_usage_errors_that_say_what_to_write(
    options: dict[str, Any], advice: str
) -> None:
    with pytest.raises(UsageError, match=advice):
        conform(factory(), list(INPUTS), **options)


class HangsWhenSuperseded(Conforming):
    """Hangs once it sees that someone else finished jobs it has not (only the woken start)."""

    def charge(self, job: str) -> None:
        super().charge(job)
        if len(self.store.load().get("done", [])) > len(self.data["done"]) + 1:
            time.sleep(60)  # real time: a hang the harness must time out and kill


@pytest.mark.skipif(not hasattr(os, "fork"), reason="process mode needs os.fork")
def test_a_woken_start_that_hangs_is_killed_and_reported_as_a_timeout(tmp_path: Path) -> None:
    report = conform(
        _files(tmp_path, HangsWhenSuperseded),
        list(INPUTS),
        mode="process",
        workers=2,
        only="run-overlap-before-2",
        timeout=1.5,
    )

    [finding] = report.findings
    assert (finding.kind, finding.scenario) == ("timeout", "run-overlap-before-2")
    assert finding.message == (
        "the first run, woken, did not finish its input after waking within 1.5 s and was "
        "stopped, while stepping input 2 of 3 ('job-2')"
    )


def test_only_the_baselines_runs_no_overlap_scenario_either() -> None:
    report = conform(factory(), list(INPUTS), scenarios=["crash", "overlap"], only="run")

    assert report.scenarios == []
    assert report.passed


class ThreadedMailer(UnkeyedAgent):
    """Charges, then emails from a thread of its own that finds the start by current_context()."""

    def step(self, job: str) -> None:
        if job in self.done:
            return
        self.charge(job)
        sent: list[object] = []
        worker = threading.Thread(target=lambda: sent.append(self.email(job)))
        worker.start()
        worker.join()
        if not sent:
            raise RuntimeError("the email thread found no running start")
        self.done.add(job)
        self.store.save("done", self.done)

    @staticmethod
    def email(job: str) -> object:
        ctx = current_context()
        return None if ctx is None else ctx.effect("email", job)


def test_threads_the_woken_start_starts_in_process_still_find_it() -> None:
    report = conform(factory(ThreadedMailer), list(INPUTS), only="run-overlap-1")

    overlap = {str(f.kind): f.message for f in report.findings}
    assert "the first run, woken, made email('job-1')" in overlap["overlap"]
    assert "email('job-1') happened 2 times" in overlap["duplicate_effect"]
