"""Exceptions of the crashresume harness.

The tree::

    Exception
    └── CrashResumeError        everything the harness raises on purpose
        ├── UsageError          the public API was called wrongly; the message says how to fix it
        ├── BaselineError       the crash-free baseline raised: there is nothing to compare with
        └── IsolationError      process mode could not run a child or make sense of what it sent

    BaseException
    └── SimulatedCrash          the injected crash; subject code must never catch it

``SimulatedCrash`` is deliberately *not* an ``Exception``: a subject that wraps its side
effect in ``except Exception`` must still die at the crash point, exactly as a killed process
would.
"""

from __future__ import annotations


class CrashResumeError(Exception):
    """Root of the errors the harness raises on purpose; raised as one of its subclasses."""


class UsageError(CrashResumeError):
    """Raised when ``conform`` (or the CLI) is called with arguments it cannot work with; the
    message says how to fix the call."""


class BaselineError(CrashResumeError):
    """Raised when the crash-free baseline run raises, so no crash scenario can be judged."""


class IsolationError(CrashResumeError):
    """Raised when process mode fails: no ``os.fork``, unpicklable data, or a child that
    vanished."""


class SimulatedCrash(BaseException):
    """Raised by the harness inside the subject at a side-effect boundary: the injected crash.

    It derives from ``BaseException`` so that ``except Exception`` in the subject cannot
    swallow it. Catching it (``except BaseException``, a bare ``except``) hides the crash; the
    report then carries a note, and only ``mode="process"`` can still kill the subject.
    """
