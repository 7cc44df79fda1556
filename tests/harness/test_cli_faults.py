"""crashresume check --faults / --expect / --at-most-once, and their usage errors."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import pytest

from crashresume import cli

from .test_cli import agents  # noqa: F401 (the fixture)

RETRYING = """
STORES = {}

class Retries:
    def __init__(self, ctx, done):
        self.ctx, self.done = ctx, done

    def step(self, job):
        if job in self.done:
            return
        try:
            self.ctx.effect("charge", job, key=f"charge:{job}")
        except TimeoutError:
            self.ctx.effect("charge", job)  # the retry forgets the key
        self.done.add(job)

def make_retrying(ctx):
    return Retries(ctx, STORES.setdefault(ctx.run_id, set()))
"""


def test_faults_find_the_retry_and_the_cli_rerun_line_reproduces_it(
    agents: str,  # noqa: F811
    capsys: pytest.CaptureFixture[str],
) -> None:
    Path(f"{agents}.py").write_text(Path(f"{agents}.py").read_text() + RETRYING)
    target = f"{agents}:make_retrying"
    assert cli.main(["check", target, "--inputs", "a", "b"]) == cli.EXIT_PASSED
    sys.modules[agents].STORES.clear()
    capsys.readouterr()

    status = cli.main(["check", target, "--inputs", "a", "b", "--faults", "lost", "--json", "-"])

    assert status == cli.EXIT_FINDINGS
    report = json.loads(capsys.readouterr().out)
    assert [(f["scenario"], f["kind"]) for f in report["findings"]] == [
        ("run-lost-1", "retry_duplicated"),
        ("run-lost-2", "retry_duplicated"),
    ]
    rerun = report["findings"][1]["rerun_cli"]
    assert rerun == f"crashresume check {target} --inputs a b --only run-lost-2"
    sys.modules[agents].STORES.clear()
    assert cli.main([*shlex.split(rerun)[1:], "--json", "again.json"]) == cli.EXIT_FINDINGS
    assert json.loads(Path("again.json").read_text())["findings"] == [report["findings"][1]]


def test_rules_from_the_command_line(agents: str, capsys: pytest.CaptureFixture[str]) -> None:  # noqa: F811
    args = ["check", f"{agents}:make_agent", "--inputs", "a", "b", "--json", "-"]

    status = cli.main([*args, "--expect", "charge=3", "--at-most-once", "charge"])

    assert status == cli.EXIT_FINDINGS
    report = json.loads(capsys.readouterr().out)
    assert [(f["scenario"], f["kind"]) for f in report["findings"]] == [("run", "rule_broken")]
    assert (
        "charge happened 2 times, expect={'charge': 3} wants 3 times"
        in (report["findings"][0]["message"])
    )
    assert report["findings"][0]["rerun_cli"] == (
        f"crashresume check {agents}:make_agent --inputs a b --only run --expect charge=3 "
        "--at-most-once charge"
    )


@pytest.mark.parametrize(
    ("extra", "complaint"),
    [
        (["--faults", "late"], "argument --faults: invalid choice: 'late'"),
        (["--expect", "charge"], "'charge' is not NAME=N; write it like send_invoice=3"),
        (["--expect", "charge=x"], "'charge=x' is not NAME=N"),
        (["--only", "run-lost-5"], "only='run-lost-5' names effect call 5"),
    ],
)
def test_bad_fault_and_rule_options_exit_2_and_say_what_is_wrong(
    agents: str,  # noqa: F811
    capsys: pytest.CaptureFixture[str],
    extra: list[str],
    complaint: str,
) -> None:
    status = cli.main(["check", f"{agents}:make_agent", "--inputs", "a", *extra])

    assert status == cli.EXIT_USAGE
    assert complaint in capsys.readouterr().err
