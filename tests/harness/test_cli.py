"""The crashresume command: --selftest, check MODULE:FACTORY, and its exit statuses."""

from __future__ import annotations

import itertools
import json
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from crashresume import _selftest, cli

AGENT_MODULE = """
STORES = {}

class Agent:
    KEYED = True

    def __init__(self, ctx, done):
        self.ctx, self.done = ctx, done

    def step(self, job):
        if job in self.done:
            return
        self.ctx.effect("charge", job, key=f"charge:{job}" if self.KEYED else None)
        self.done.add(job)

class Unkeyed(Agent):
    KEYED = False

class Broken(Agent):
    def step(self, job):
        raise RuntimeError("no luck")

def make_agent(ctx):
    return Agent(ctx, STORES.setdefault(ctx.run_id, set()))

def make_unkeyed(ctx):
    return Unkeyed(ctx, STORES.setdefault(ctx.run_id, set()))

def make_broken(ctx):
    return Broken(ctx, set())

NOT_A_FACTORY = 42
"""

_names = itertools.count()


@pytest.fixture
def agents(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A fresh module of agents in the current folder; returns its name."""
    name = f"cli_agents_{next(_names)}"
    (tmp_path / f"{name}.py").write_text(AGENT_MODULE)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))  # the CLI adds the current folder
    return name


def test_selftest_exits_0_and_prints_one_verdict_per_subject(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert cli.main(["--selftest"]) == cli.EXIT_PASSED

    out = capsys.readouterr().out
    assert out.startswith("crashresume selftest: mode=inprocess, inputs job-1 job-2 job-3\n")
    assert "ok        fresh key per attempt\n          expects duplicate_effect in run-1" in out
    assert out.count("\nok ") == len(_selftest.CASES)
    assert out.endswith("11 subjects: every finding where expected and nowhere else\n")


def test_selftest_exits_3_when_an_expected_finding_is_missing(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    wrong = _selftest.Case(
        name="fresh key, wrongly expected clean",
        subject=_selftest.FreshKeyPerAttempt,
        expected=frozenset({("run-1", "state_lost")}),
    )
    monkeypatch.setattr(_selftest, "CASES", (_selftest.CASES[0], wrong))

    assert cli.main(["--selftest"]) == cli.EXIT_SELFTEST_MISMATCH

    out = capsys.readouterr().out
    assert "MISMATCH  fresh key, wrongly expected clean\n" in out
    assert "          missing state_lost in run-1\n" in out
    assert "          unexpected duplicate_effect in run-1 run-2 run-3\n" in out


@pytest.mark.parametrize("command", [[sys.executable, "-m", "crashresume"], ["crashresume"]])
def test_the_selftest_runs_from_the_shell_in_process_mode_too(command: list[str]) -> None:
    if command == ["crashresume"]:
        script = Path(sys.executable).with_name("crashresume")
        if not script.exists():
            found = shutil.which("crashresume")
            if found is None:
                pytest.skip("the crashresume console script is not installed")
            script = Path(found)
        command = [str(script)]

    done = subprocess.run(
        [*command, "--selftest", "--mode", "process"], capture_output=True, text=True
    )

    assert done.returncode == 0, done.stdout + done.stderr
    assert "mode=process" in done.stdout


def test_check_prints_the_report_writes_json_and_exits_0_when_it_passes(
    agents: str, capsys: pytest.CaptureFixture[str]
) -> None:
    status = cli.main(["check", f"{agents}:make_agent", "--inputs", "a", "b", "--json", "r.json"])

    assert status == cli.EXIT_PASSED
    assert capsys.readouterr().out.startswith("crashresume: PASSED: make_agent over 2 inputs")
    report = json.loads(Path("r.json").read_text())
    assert report["passed"] is True
    assert report["scenarios"] == ["run-before-1", "run-1", "run-before-2", "run-2"]


def test_check_exits_1_with_findings_whose_cli_rerun_line_reproduces_one_scenario(
    agents: str, capsys: pytest.CaptureFixture[str]
) -> None:
    status = cli.main(["check", f"{agents}:make_unkeyed", "--inputs", "a", "b", "--json", "-"])

    assert status == cli.EXIT_FINDINGS
    captured = capsys.readouterr()
    report = json.loads(captured.out)  # stdout holds the JSON and nothing else
    assert captured.err.startswith("crashresume: FAILED: make_unkeyed over 2 inputs")
    assert [f["scenario"] for f in report["findings"]] == ["run-1", "run-2"]
    rerun = report["findings"][1]["rerun_cli"]
    assert rerun == (f"crashresume check {agents}:make_unkeyed --inputs a b --only run-2")

    sys.modules[agents].STORES.clear()  # a real rerun is a new process with fresh stores
    args = [*shlex.split(rerun)[1:], "--json", "again.json"]
    assert cli.main(args) == cli.EXIT_FINDINGS
    again = json.loads(Path("again.json").read_text())
    assert again["scenarios"] == ["run-2"]
    assert again["findings"] == [report["findings"][1]]


@pytest.mark.parametrize(
    ("args", "complaint"),
    [
        (["check", "{m}", "--inputs", "a"], "is not MODULE:FACTORY"),
        (["check", "no_such_module_here:make", "--inputs", "a"], "cannot import module"),
        (["check", "{m}:missing", "--inputs", "a"], "has no 'missing'"),
        (["check", "{m}:NOT_A_FACTORY", "--inputs", "a"], "is a int, not a factory"),
        (["check", "{m}:make_agent", "--inputs", "a", "--only", "run-9"], "k from 1 to 1"),
        (["check", "{m}:make_agent", "--inputs", "a", "--crashes", "0"], "crashes=0"),
        ([], "give either --selftest or the check command"),
        (["--selftest", "check", "{m}:make_agent", "--inputs", "a"], "give either"),
        (["check", "{m}:make_agent"], "the following arguments are required: --inputs"),
        (["check", "{m}:make_agent", "--inputs", "a", "--repeat", "0"], "repeat=0: run each"),
        (["check", "{m}:make_agent", "--inputs", "a", "--scenarios", "nap"], "invalid choice"),
    ],
    ids=[
        "no-colon",
        "no-module",
        "no-attr",
        "not-callable",
        "bad-only",
        "crashes-0",
        "no-command",
        "both",
        "no-inputs",
        "repeat-0",
        "bad-scenario-kind",
    ],
)
def test_usage_errors_exit_2_and_say_what_is_wrong(
    agents: str, capsys: pytest.CaptureFixture[str], args: list[str], complaint: str
) -> None:
    status = cli.main([arg.replace("{m}", agents) for arg in args])

    assert status == cli.EXIT_USAGE
    assert complaint in capsys.readouterr().err


def test_a_subject_whose_baseline_raises_is_not_judged_and_exits_4(
    agents: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["check", f"{agents}:make_broken", "--inputs", "a"]) == cli.EXIT_NOT_RUN
    assert "RuntimeError: no luck" in capsys.readouterr().err


def test_help_exits_0_and_documents_every_exit_status(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["--help"]) == 0

    out = capsys.readouterr().out
    for line in [
        "0  passed",
        "1  the report has findings",
        "2  usage error",
        "3  --selftest",
        "4  not judged",
    ]:
        assert line in out


def test_version_prints_the_installed_version_and_exits_0(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from importlib.metadata import version

    assert cli.main(["--version"]) == cli.EXIT_PASSED

    assert capsys.readouterr().out == f"crashresume {version('crashresume')}\n"


def test_json_to_stdout_pipes_into_jq_with_the_text_report_on_stderr(agents: str) -> None:
    jq = shutil.which("jq")
    command = [sys.executable, "-m", "crashresume", "check", f"{agents}:make_unkeyed"]
    done = subprocess.run(
        [*command, "--inputs", "a", "b", "--json", "-"], capture_output=True, text=True
    )

    assert done.returncode == cli.EXIT_FINDINGS, done.stderr
    report = json.loads(done.stdout)
    assert report["passed"] is False
    assert "duplicate_effect: 2 scenarios" in done.stderr
    assert "crashresume: FAILED" not in done.stdout
    if jq is not None:
        kinds = subprocess.run(
            [jq, "-r", ".findings[].kind"], input=done.stdout, capture_output=True, text=True
        )
        assert kinds.stdout.split() == ["duplicate_effect", "duplicate_effect"]


def test_check_passes_timeout_workers_and_explore_through(
    agents: str, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["check", f"{agents}:make_unkeyed", "--inputs", "a", "b", "--json", "-"]
    assert cli.main([*args, "--mode", "process"]) == 1
    serial = json.loads(capsys.readouterr().out)
    assert cli.main([*args, "--mode", "process", "--workers", "2", "--timeout", "30"]) == 1
    parallel = json.loads(capsys.readouterr().out)
    sys.modules[agents].STORES.clear()
    assert cli.main([*args, "--explore", "hypothesis", "--max-examples", "5", "--seed", "7"]) == 1
    drawn = json.loads(capsys.readouterr().out)

    assert parallel["mode"] == "process"
    assert parallel == serial
    assert {f["kind"] for f in parallel["findings"]} >= {"duplicate_effect"}
    assert drawn["explore"] == "hypothesis"
    assert drawn["seed"] == 7
    assert drawn["findings"][0]["kind"] == "duplicate_effect"


def test_check_repeat_counts_each_finding_and_its_rerun_repeats_too(
    agents: str, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["check", f"{agents}:make_unkeyed", "--inputs", "a", "--repeat", "3", "--json", "-"]
    assert cli.main(args) == cli.EXIT_FINDINGS

    report = json.loads(capsys.readouterr().out)
    assert report["repeat"] == 3
    assert report["scenarios"] == ["run-before-1", "run-1"]
    [finding] = report["findings"]
    assert (finding["scenario"], finding["kind"], finding["repeats"]) == (
        "run-1",
        "duplicate_effect",
        "3/3",
    )
    assert finding["rerun_cli"].endswith("--only run-1 --repeat 3")


def test_check_scenarios_overlap_runs_the_overlap_scenarios_alone(
    agents: str, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["check", f"{agents}:make_unkeyed", "--inputs", "a", "--scenarios", "overlap"]
    args += ["--json", "-"]
    assert cli.main(args) == cli.EXIT_FINDINGS

    report = json.loads(capsys.readouterr().out)
    assert report["scenarios"] == ["run-overlap-before-1", "run-overlap-1"]
    # Frozen before its unkeyed send, the old start sends it again once woken; frozen
    # after it, its restart sends it again, as after a crash there.
    assert {(f["scenario"], f["kind"]) for f in report["findings"]} == {
        ("run-overlap-before-1", "duplicate_effect"),
        ("run-overlap-before-1", "overlap"),
        ("run-overlap-1", "duplicate_effect"),
    }
