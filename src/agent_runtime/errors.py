"""Errors of the agent runtime.

Every error the runtime raises on purpose derives from :class:`AgentRuntimeError`
and carries the process exit code the CLI uses for it::

    AgentRuntimeError
    ├── ConfigError            bad settings or a wrong CRASH_AT name        (exit 2)
    │   ├── InvalidRunId       a run id refused at the edge (empty, blank, control
    │   │                      characters, over 200 characters); nothing is written
    │   ├── WrongEndpoint      a remote answered 404 or 405: CLOUD_URL or MODEL_URL names
    │   │                      the wrong service; the run stays resumable  (exit 2)
    │   ├── UnknownAgent       the run belongs to an agent this worker does not have; the
    │   │                      run is not touched                          (exit 2)
    │   └── SchemaTooNew       the database's schema is newer than this code knows;
    │                          nothing is touched (agent_runtime.store.migrate)   (exit 2)
    ├── DatabaseError          unreachable database, missing schema, a failed
    │                          migration                                    (exit 4)
    ├── RunNotFound            no run with that id                          (exit 2)
    │   └── CallNotFound       the run has no tool call with that seq (resolve --seq)
    ├── RunUnavailable         the run is held by a live worker, or final    (exit 5)
    │   ├── BackingOff         released after a resumable error; claimable again once
    │   │                      its backoff has passed                       (exit 4)
    │   └── NeedsAttention     a call nothing can tell the outcome of (a 'once' tool) is in
    │                          doubt: the run waits for an operator's resolve   (exit 6)
    ├── LeaseLost              fenced: another worker owns the run now       (exit 5)
    ├── ModelError             the model answered something unusable         (exit 4)
    │   ├── ModelUnavailable   no answer: connect errors, 5xx or timeouts past the retries
    │   ├── MalformedAnswer    not a decision at all, or one the journal cannot hold
    │   │                      (journalable.py: U+0000, NaN, too deep, too long)
    │   ├── UnknownTool        a tool this runtime does not have   } journaled as the
    │   ├── InvalidArguments   the right tool with arguments it    } model's answer, the
    │   │                      rejects                             } error shown back to it
    │   ├── TooManyBadAnswers  more such answers than max_bad_answers (exit 3)
    │   └── UnusableDecision   a journaled decision this runtime cannot act on (exit 3)
    ├── RemoteError            a tool's remote did not act, or said no
    │   ├── RemoteUnavailable  5xx, timeouts or a tool's retryable exceptions past the
    │   │   │                  retry budget                                (exit 4)
    │   │   └── CallInFlight   a checked call's earlier attempt may still act: its check
    │   │                      must wait, and the clock did not move; the run is released
    │   │                      until the attempt can no longer land       (exit 4)
    │   ├── RemoteRejected     a 4xx the run cannot recover from           (exit 3)
    │   └── StaleGeneration    the cloud fenced a call from an old owner    (exit 5)
    └── UnexpectedError        a bug: an exception the runtime has no name for, raised
                               while it held a run; the run keeps the reason (a
                               traceback is logged) and stays resumable    (exit 70)

Only a permanent error (``permanent = True``: ``UnusableDecision``, ``TooManyBadAnswers``,
``RemoteRejected``)
fails a run at once. Every other error under a lease releases the run with a backoff
(:mod:`agent_runtime.backoff`); the supervisor fails it only after ``max_attempts`` claims
*and* ``give_up_after`` seconds without progress (see :mod:`agent_runtime.config`).

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
EXIT_NEEDS_ATTENTION = 6  # a call is in doubt; an operator decides (resolve --seq N ...)
EXIT_CRASH_NOT_REACHED = 7  # the run ended (done) without reaching CRASH_AT/CRASH_SEQ
EXIT_SOFTWARE = 70  # EX_SOFTWARE (sysexits.h): a bug, its traceback is in the log


class AgentRuntimeError(Exception):
    """Root of the runtime's own errors."""

    exit_code = EXIT_RETRY_LATER
    # A permanent error marks the run failed; others leave it resumable.
    permanent = False
    # Set once the error has been logged with what it did to the run (a worker's stopped
    # or failed line), so the process edge does not print a second ERROR line for it.
    reported = False
    # The run's state already says what happened (parked): no release, no failure.
    recorded_on_run = False


class ConfigError(AgentRuntimeError):
    exit_code = EXIT_USAGE


class InvalidRunId(ConfigError):
    pass


class WrongEndpoint(ConfigError):
    """404 or 405: the URL reaches a server, but not the service it should (a CLOUD_URL
    pointing at the model, a path prefix missing). Fix the setting; the run resumes."""


class UnknownAgent(ConfigError):
    pass


class SchemaTooNew(ConfigError):
    """A newer crashresume migrated this database: this one refuses it rather than guess
    (upgrade, or use another database)."""


class DatabaseError(AgentRuntimeError):
    exit_code = EXIT_RETRY_LATER


class RunNotFound(AgentRuntimeError):
    exit_code = EXIT_USAGE


class CallNotFound(RunNotFound):
    pass


class RunUnavailable(AgentRuntimeError):
    exit_code = EXIT_NOT_OWNER


class BackingOff(RunUnavailable):
    exit_code = EXIT_RETRY_LATER


class NeedsAttention(RunUnavailable):
    exit_code = EXIT_NEEDS_ATTENTION
    recorded_on_run = True


class LeaseLost(AgentRuntimeError):
    exit_code = EXIT_NOT_OWNER


class ModelError(AgentRuntimeError):
    exit_code = EXIT_RETRY_LATER


class ModelUnavailable(ModelError):
    pass


class MalformedAnswer(ModelError):
    pass


class UnknownTool(ModelError):
    pass


class InvalidArguments(ModelError):
    pass


class TooManyBadAnswers(ModelError):
    """The model named unknown tools or sent invalid arguments more often than a run
    allows (``Settings.max_bad_answers``): each was shown to it, and it did not mend."""

    exit_code = EXIT_FAILED
    permanent = True


class UnusableDecision(ModelError):
    exit_code = EXIT_FAILED
    permanent = True


class RemoteError(AgentRuntimeError):
    exit_code = EXIT_RETRY_LATER


class RemoteUnavailable(RemoteError):
    pass


class CallInFlight(RemoteUnavailable):
    """A ``checked`` call cannot be checked yet: an earlier attempt of it may still act at
    the remote for ``retry_after`` seconds (on the database clock), and waiting here did
    not bring that moment closer. The run is released until then, never checked early."""

    def __init__(self, message: str, retry_after: float) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class RemoteRejected(RemoteError):
    exit_code = EXIT_FAILED
    permanent = True


class StaleGeneration(RemoteError, LeaseLost):
    exit_code = EXIT_NOT_OWNER


class UnexpectedError(AgentRuntimeError):
    """Wraps (``from``) an exception the runtime did not expect while it held a run."""

    exit_code = EXIT_SOFTWARE
