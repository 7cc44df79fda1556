"""A bug on demand, for tests/test_unexpected.py: put this folder on ``PYTHONPATH`` and
set ``CRASHRESUME_TEST_BUG``, and every process started that way (a supervisor, its
forked workers, a CLI run) has one:

- ``decide``: reading the model's answer raises ``RuntimeError`` (the worker holds the run);
- ``open``: starting a worker raises ``RuntimeError`` (before it holds the run).

The message carries an escape sequence, so the test also sees that a traceback is
printed inert. Nothing happens without the variable.
"""

from __future__ import annotations

import os

BUG = os.environ.get("CRASHRESUME_TEST_BUG")
MESSAGE = "a bug on purpose \x1b[31m(tests/hooks)"

if BUG:
    from agent_runtime import deciding, worker

    def _broken(*args: object, **kwargs: object) -> object:
        raise RuntimeError(f"{BUG}: {MESSAGE}")

    if BUG == "decide":
        deciding.checked_answer = _broken  # type: ignore[assignment]
    elif BUG == "open":
        worker.Worker.open = _broken  # type: ignore[assignment, method-assign]
