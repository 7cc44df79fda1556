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
    """Root of the errors the harness raises on purpose."""


class UsageError(CrashResumeError):
    """``conform`` (or the CLI) was called with arguments it cannot work with."""


class BaselineError(CrashResumeError):
    """The crash-free baseline run raised, so no crash scenario can be judged."""


class IsolationError(CrashResumeError):
    """Process mode failed: no ``os.fork``, unpicklable data, or a child that vanished."""


class SimulatedCrash(BaseException):
    """The crash the harness injects at a side-effect boundary.

    It derives from ``BaseException`` so that ``except Exception`` in the subject cannot
    swallow it. Catching it (``except BaseException``, a bare ``except``) hides the crash; the
    report then carries a note, and only ``mode="process"`` can still kill the subject.
    """
