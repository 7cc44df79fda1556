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
    """Root of the runtime's own errors: catch it to handle whatever the runtime raises on
    purpose. Raised as one of its subclasses, never itself; ``exit_code`` is what the CLI exits
    with, ``permanent`` whether it fails the run at once."""

    exit_code = EXIT_RETRY_LATER
    # A permanent error marks the run failed; others leave it resumable.
    permanent = False
    # Set once the error has been logged with what it did to the run (a worker's stopped
    # or failed line), so the process edge does not print a second ERROR line for it.
    reported = False
    # The run's state already says what happened (parked): no release, no failure.
    recorded_on_run = False


class ConfigError(AgentRuntimeError):
    """Raised when a setting or argument is wrong (an environment variable, ``--agent``,
    ``CRASH_AT``), before anything is started or written; fix it and run again (exit 2)."""

    exit_code = EXIT_USAGE


class InvalidRunId(ConfigError):
    """Raised when a run id is refused at the edge (empty, blank, control characters,
    over 200 characters); nothing is written."""


class WrongEndpoint(ConfigError):
    """Raised when a remote answers 404 or 405: the URL reaches a server, but not the
    service it should (a CLOUD_URL pointing at the model, a path prefix missing). Fix the
    setting; the run resumes."""


class UnknownAgent(ConfigError):
    """Raised when a run belongs to an agent this worker was not given (``agents=``,
    ``--agent``); the run is not touched, a worker that has that agent can take it."""


class SchemaTooNew(ConfigError):
    """A newer crashresume migrated this database: this one refuses it rather than guess
    (upgrade, or use another database)."""


class DatabaseError(AgentRuntimeError):
    """Raised when the database cannot be used: unreachable, or without the schema
    where one is needed (exit 4: try again once it is back)."""

    exit_code = EXIT_RETRY_LATER


class RunNotFound(AgentRuntimeError):
    """Raised when no run has the given id (``show``, ``resolve``, ``cancel``,
    ``Worker.run(create=False)``)."""

    exit_code = EXIT_USAGE


class CallNotFound(RunNotFound):
    """Raised when a run has no tool call with the given seq (``resolve --seq N``)."""


class RunUnavailable(AgentRuntimeError):
    """Raised when a run cannot be taken now: a live worker holds its lease, or it
    is final (exit 5)."""

    exit_code = EXIT_NOT_OWNER


class BackingOff(RunUnavailable):
    """Raised when a run was released after a resumable error and its backoff has not
    passed yet; the message says until when (exit 4: it is claimable again after that)."""

    exit_code = EXIT_RETRY_LATER


class NeedsAttention(RunUnavailable):
    """Raised when a call nothing can tell the outcome of (a ``once`` tool's intent
    without a confirm) is in doubt: the run is parked until an operator's ``resolve`` (exit 6)."""

    exit_code = EXIT_NEEDS_ATTENTION
    recorded_on_run = True


class LeaseLost(AgentRuntimeError):
    """Raised when a write is fenced: another worker claimed the run (its lease expired
    or an operator took it over), so this worker must stop touching it (exit 5)."""

    exit_code = EXIT_NOT_OWNER


class ModelError(AgentRuntimeError):
    """Raised when the model's side fails: no answer, or one the runtime cannot use
    (exit 4, resumable, unless the subclass is permanent)."""

    exit_code = EXIT_RETRY_LATER


class ModelUnavailable(ModelError):
    """Raised when the model gives no answer: connect errors, 5xx or timeouts past
    the client's retries. The run is released with a backoff."""


class MalformedAnswer(ModelError):
    """Raised when the model's answer is not a decision at all, or one the journal
    cannot hold (``journalable``: U+0000, NaN, too deep, too long); nothing of it is
    journaled and the model is asked again on resume."""


class UnknownTool(ModelError):
    """Raised when the model names a tool the run's agent does not have. The answer is
    journaled and the error shown back to the model, which answers again (up to
    ``max_bad_answers``)."""


class InvalidArguments(ModelError):
    """Raised when the model calls the right tool with arguments its parameters
    reject (a missing or extra field, a wrong type). Journaled and shown back to the model
    like :class:`UnknownTool`."""


class TooManyBadAnswers(ModelError):
    """Raised when the model named unknown tools or sent invalid arguments more often than a
    run allows (``Settings.max_bad_answers``): each was shown to it, and it did not mend."""

    exit_code = EXIT_FAILED
    permanent = True


class UnusableDecision(ModelError):
    """Raised when a journaled decision cannot be acted on by this runtime (its tool
    is gone or its arguments no longer fit); the run fails (exit 3)."""

    exit_code = EXIT_FAILED
    permanent = True


class RemoteError(AgentRuntimeError):
    """Raised when a tool's remote did not act, or said no."""

    exit_code = EXIT_RETRY_LATER


class RemoteUnavailable(RemoteError):
    """Raised when a tool's call did not get through: 5xx, timeouts or the tool's
    retryable exceptions past its retry budget. The intent stays on record and a restart
    resolves it by the tool's effect (exit 4)."""


class CallInFlight(RemoteUnavailable):
    """Raised when a ``checked`` call cannot be checked yet: an earlier attempt of it may
    still act at the remote for ``retry_after`` seconds (on the database clock), and waiting
    here did not bring that moment closer. The run is released until then, never checked
    early."""

    def __init__(self, message: str, retry_after: float) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class RemoteRejected(RemoteError):
    """Raised when a remote refuses a call with a 4xx the run cannot recover from;
    the run fails (exit 3)."""

    exit_code = EXIT_FAILED
    permanent = True


class StaleGeneration(RemoteError, LeaseLost):
    """Raised when the cloud fences a call sent under an older generation than the
    run's current owner: this worker lost the run (exit 5)."""

    exit_code = EXIT_NOT_OWNER


class UnexpectedError(AgentRuntimeError):
    """Raised when the runtime meets an exception it did not expect while it held a run,
    wrapping it (``from``); the run keeps the reason and stays resumable (exit 70)."""

    exit_code = EXIT_SOFTWARE
