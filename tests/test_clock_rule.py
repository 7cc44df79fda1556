"""The testing rule for time: nothing waits for a lease, a backoff or a give-up to pass.

A test that moves ``cr_now()`` freezes it first (the ``frozen_clock`` fixture or
``clock.freeze``); ``clock.advance`` on a running clock fails the test, since what it
expires then depends on how fast the machine is (``tests/fix_runtime.py`` checks each
call). And no test sleeps a second or more unless the line says why real time is the
point (``# real time: ...``): a wait that must be "long enough" flakes under load.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agent_runtime.store import clock

TESTS = Path(__file__).parent
REAL_TIME = "# real time:"  # the allow-list: a reason on the sleep's own line
LONG = 1.0  # seconds: a fixed sleep this long or longer needs the reason

CHILD = """
import sys
from agent_runtime.store import clock, db
with db.connection(sys.argv[1]) as conn:
    print(clock.now(conn).isoformat())
"""


def test_advancing_a_running_clock_fails_the_test(conn: Any) -> None:
    with pytest.raises(pytest.fail.Exception, match=r"clock\.advance on a running clock"):
        clock.advance(conn, 13)
    assert clock.skew(conn).total_seconds() == 0  # and the clock was not moved
    at = clock.freeze(conn)
    assert clock.frozen_at(conn) == at
    assert (clock.advance(conn, 13) - at).total_seconds() == 13
    assert (clock.now(conn) - at).total_seconds() == 13


def test_a_frozen_clock_stands_still_in_a_child_process_too(
    frozen_clock: Any, conn: Any, database_url: str
) -> None:
    clock.advance(conn, 30)
    seen = subprocess.run(
        [sys.executable, "-c", CHILD, database_url],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert seen.stdout.strip() == clock.now(conn).isoformat()
    assert (clock.now(conn) - frozen_clock).total_seconds() == 30


def _constants(tree: ast.Module) -> dict[str, float]:
    """Module-level ``NAME = <number>``, so ``time.sleep(OUTAGE)`` is read as a number."""
    found: dict[str, float] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant):
            for target in node.targets:
                if isinstance(target, ast.Name) and isinstance(node.value.value, int | float):
                    found[target.id] = float(node.value.value)
    return found


def long_sleeps(source: str) -> list[int]:
    """Lines of ``time.sleep(x)`` with ``x`` a number (or a module constant) of at least
    :data:`LONG` seconds and no ``# real time:`` reason on the line."""
    tree = ast.parse(source)
    constants = _constants(tree)
    lines = source.splitlines()
    found = []
    for node in ast.walk(tree):
        if not (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "sleep"
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id == "time"
            and node.args
        ):
            continue
        arg = node.args[0]
        if isinstance(arg, ast.Constant) and isinstance(arg.value, int | float):
            seconds = float(arg.value)
        elif isinstance(arg, ast.Name) and arg.id in constants:
            seconds = constants[arg.id]
        else:
            continue  # computed: a poll interval or a mock's latency, read by a reviewer
        if seconds >= LONG and REAL_TIME not in lines[node.lineno - 1]:
            found.append(node.lineno)
    return found


def test_the_sleep_finder_sees_a_long_sleep_and_honours_a_reason() -> None:
    source = (
        "import time\nWAIT = 2.5\n"
        "time.sleep(1)\n"
        "time.sleep(0.05)\n"
        "time.sleep(WAIT)\n"
        "time.sleep(30)  # real time: the process must be slow\n"
        "def f(x):\n    time.sleep(x + 1)\n"
    )
    assert long_sleeps(source) == [3, 5]


def test_no_test_sleeps_a_second_or_more_without_saying_why() -> None:
    offenders = [
        f"{path.relative_to(TESTS.parent)}:{line}"
        for path in sorted(TESTS.rglob("*.py"))
        for line in long_sleeps(path.read_text("utf-8"))
    ]
    assert offenders == [], (
        "a fixed sleep of a second or more: freeze the clock and advance it, or wait for "
        f"a condition; if real time is the point, say so with '{REAL_TIME} ...' on the line"
    )
