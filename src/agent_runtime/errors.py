"""Errors of the agent runtime.

Every error the runtime raises on purpose derives from :class:`AgentRuntimeError`
and carries the process exit code the CLI uses for it::

    AgentRuntimeError
    ├── ConfigError            bad settings or a wrong CRASH_AT name        (exit 2)
    ├── DatabaseError          unreachable database, missing schema         (exit 4)
    ├── RunNotFound            no run with that id                          (exit 2)
    ├── RunUnavailable         the run is held by a live worker, or final    (exit 5)
    ├── LeaseLost              fenced: another worker owns the run now       (exit 5)
    ├── ModelError             the model answered something unusable         (exit 4)
    │   ├── MalformedAnswer    not a decision at all
    │   ├── UnknownTool        a tool this runtime does not have
    │   ├── InvalidArguments   the right tool with arguments it rejects
    │   └── UnusableDecision   a journaled decision this runtime cannot act on (exit 3)
    └── RemoteError            the cloud did not act, or said no
        ├── RemoteUnavailable  5xx or timeouts past the retry budget       (exit 4)
        ├── RemoteRejected     a 4xx the run cannot recover from           (exit 3)
        └── StaleGeneration    the cloud fenced a call from an old owner    (exit 5)

The injected crash is not here: it is a real ``os._exit`` in the CLI, or
:class:`agent_runtime.crash.InjectedCrash` (a ``BaseException``) in-process.
"""

from __future__ import annotations

EXIT_DONE = 0
EXIT_CRASHED = 1
EXIT_USAGE = 2
EXIT_FAILED = 3
EXIT_RETRY_LATER = 4
EXIT_NOT_OWNER = 5


class AgentRuntimeError(Exception):
    """Root of the runtime's own errors."""

    exit_code = EXIT_RETRY_LATER
    # A permanent error marks the run failed; others leave it resumable.
    permanent = False
    # Set once the error has been logged with what it did to the run (a worker's stopped
    # or failed line), so the process edge does not print a second ERROR line for it.
    reported = False


class ConfigError(AgentRuntimeError):
    exit_code = EXIT_USAGE


class DatabaseError(AgentRuntimeError):
    exit_code = EXIT_RETRY_LATER


class RunNotFound(AgentRuntimeError):
    exit_code = EXIT_USAGE


class RunUnavailable(AgentRuntimeError):
    exit_code = EXIT_NOT_OWNER


class LeaseLost(AgentRuntimeError):
    exit_code = EXIT_NOT_OWNER


class ModelError(AgentRuntimeError):
    exit_code = EXIT_RETRY_LATER


class MalformedAnswer(ModelError):
    pass


class UnknownTool(ModelError):
    pass


class InvalidArguments(ModelError):
    pass


class UnusableDecision(ModelError):
    exit_code = EXIT_FAILED
    permanent = True


class RemoteError(AgentRuntimeError):
    exit_code = EXIT_RETRY_LATER


class RemoteUnavailable(RemoteError):
    pass


class RemoteRejected(RemoteError):
    exit_code = EXIT_FAILED
    permanent = True


class StaleGeneration(RemoteError, LeaseLost):
    exit_code = EXIT_NOT_OWNER
