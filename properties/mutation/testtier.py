"""``python -m properties.mutation.testtier FILE...``: the tests tier's killing command.

Runs the named ``tests/`` files (:mod:`.tiers` names them per statement and module) with
pytest, in this interpreter, against whatever ``agent_runtime`` it imports (the driver
puts a mutated copy first on ``PYTHONPATH``); stops at the first failure. The tests start
their own throwaway cluster, from the copy's ``localpg``, as they do in CI.

Exit status: 0 the tests passed (the mutant survived), 1 a test failed (killed), 2 no
verdict (no test ran, or pytest could not run them). The first line says which
``agent_runtime`` ran, as :mod:`.check`'s does.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from importlib.util import find_spec
from pathlib import Path
from typing import Final

import pytest

NO_VERDICT: Final = 2


class _Failures:
    """A pytest plugin that keeps the ids of the tests that failed, in order."""

    def __init__(self) -> None:
        self.failed: list[str] = []
        self.passed = 0

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.failed:
            self.failed.append(f"{report.nodeid} ({report.when})")
        elif report.passed and report.when == "call":
            self.passed += 1


def main(argv: Sequence[str] | None = None) -> int:
    files = list(sys.argv[1:] if argv is None else argv)
    spec = find_spec("agent_runtime")
    print(f"agent_runtime={Path(spec.origin or '?').parent if spec else None}", flush=True)
    if not files:
        print("no verdict: name the tests/ files to run")
        return NO_VERDICT
    began = time.monotonic()
    seen = _Failures()
    code = pytest.main(["-x", "-q", "--no-header", "-p", "no:cacheprovider", *files], [seen])
    seconds = time.monotonic() - began
    if seen.failed:
        print(f"killed: tests failed: {seen.failed[0]}")
        print(f"after: {' '.join(files)} in {seconds:.1f}s")
        return 1
    if code == pytest.ExitCode.OK and seen.passed:
        print(f"survived: {seen.passed} tests of {' '.join(files)} passed in {seconds:.1f}s")
        return 0
    print(f"no verdict: pytest exit {int(code)}, {seen.passed} tests passed")
    return NO_VERDICT


if __name__ == "__main__":
    sys.exit(main())
