"""A bug on demand, for tests/test_unexpected.py: put this folder on ``PYTHONPATH`` and
set ``CRASHRESUME_TEST_BUG``, and every process started that way (a supervisor, its
forked workers, a CLI run) has one:

- ``decide``: reading the model's answer raises ``RuntimeError`` (the worker holds the run);
- ``open``: starting a worker raises ``RuntimeError`` (before it holds the run).

The message carries an escape sequence, so the test also sees that a traceback is
printed inert. Nothing happens without the variable.

For tests/test_cancel_fences.py, ``CRASHRESUME_TEST_STOP_AT=POINT:SEQ`` makes the process
stop itself with SIGSTOP when it reaches that crash point of that step (a worker frozen
at a gate, as a GC pause or a swapped-out process would be), until someone sends SIGCONT.
"""

from __future__ import annotations

import os

BUG = os.environ.get("CRASHRESUME_TEST_BUG")
STOP_AT = os.environ.get("CRASHRESUME_TEST_STOP_AT")
MESSAGE = "a bug on purpose \x1b[31m(tests/hooks)"

if BUG:
    from agent_runtime.llm import deciding
    from agent_runtime.loop import worker

    def _broken(*args: object, **kwargs: object) -> object:
        raise RuntimeError(f"{BUG}: {MESSAGE}")

    if BUG == "decide":
        deciding.checked_answer = _broken  # type: ignore[assignment]
    elif BUG == "open":
        worker.Worker.open = _broken  # type: ignore[assignment, method-assign]

if STOP_AT:
    import signal

    from agent_runtime import crash

    _point, _, _seq = STOP_AT.partition(":")
    _reached = crash.CrashPlan.reached

    def _stopping(self: crash.CrashPlan, point: str, seq: int) -> None:
        if point == _point and str(seq) == _seq:
            os.kill(os.getpid(), signal.SIGSTOP)
        _reached(self, point, seq)

    crash.CrashPlan.reached = _stopping  # type: ignore[method-assign]
