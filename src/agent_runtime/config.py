"""Settings of a worker and a supervisor, with their defaults and their checks.

Environment variables are read here and only here (``from_env``), at the CLI
edge; the library itself takes a :class:`Settings`.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from urllib.parse import urlsplit

import httpx

from .backoff import Backoff, uniform
from .crash import CrashPlan
from .duration import parse_duration
from .errors import ConfigError
from .hostid import host_identity

LEASE = 12.0  # seconds a claim is good for without a heartbeat
HEARTBEAT = 3.0  # seconds between lease renewals
POLL = 3.0  # seconds between supervisor sweeps
MODEL_TIMEOUT = 30.0  # seconds for one model answer
TOOL_TIMEOUT = 10.0  # seconds for one cloud request
IN_FLIGHT_MARGIN = 5.0  # seconds a request may still act at its remote after its sender's
# timeout: a tool's default in-flight bound is TOOL_TIMEOUT plus this (see tooldef.in_flight)
TOOL_RETRIES = 3  # extra attempts at a cloud request after a 5xx or a timeout
MODEL_RETRIES = 3  # extra attempts at a model question after a connect error, 5xx or timeout
RETRY_BACKOFF = 0.2  # seconds before a client's first retry, doubled each time (with jitter)
RETRY_BACKOFF_CAP = 5.0  # seconds a client waits at most between two attempts
RUN_BACKOFF = 1.0  # seconds a run released on a resumable error waits before its next claim,
# doubled with every further claim that makes no progress (with jitter)
RUN_BACKOFF_CAP = 120.0  # seconds that wait grows to at most
MAX_ATTEMPTS = 5  # claims without progress before the supervisor may give up on a run ...
GIVE_UP_AFTER = 600.0  # ... and seconds without progress since the first of them: both must
# hold, so an outage that burns attempts fast fails nothing within ten minutes
MAX_BAD_ANSWERS = 3  # answers naming an unknown tool or invalid arguments a run shows its
# model (each journaled, its error the call's result) before the next one fails the run
MAX_WORKERS = 4  # worker processes one supervisor runs at once
STUCK_AFTER = 600.0  # seconds a supervised run may go without a journal write while its
# worker beats before the supervisor kills that worker (0: never); well above the longest a
# healthy step waits between two writes: a model call with all its retries, ~125 s by default
PRUNE_AFTER = None  # seconds after which a supervisor removes final runs (None: never)
CLOUD_URL = "http://127.0.0.1:8001"
MODEL_URL = "http://127.0.0.1:8002"
URL_SCHEMES = ("http", "https")
# Each URL setting's environment variable and default, so a refusal names what to fix.
URL_SETTINGS = {"cloud_url": ("CLOUD_URL", CLOUD_URL), "model_url": ("MODEL_URL", MODEL_URL)}


@dataclass(frozen=True, kw_only=True)
class Settings:
    database_url: str | None = None  # None: the CLI's own local cluster
    cloud_url: str = CLOUD_URL
    model_url: str = MODEL_URL
    lease: float = LEASE
    heartbeat: float = HEARTBEAT
    poll: float = POLL
    model_timeout: float = MODEL_TIMEOUT
    tool_timeout: float = TOOL_TIMEOUT
    in_flight_margin: float = IN_FLIGHT_MARGIN
    tool_retries: int = TOOL_RETRIES
    model_retries: int = MODEL_RETRIES
    retry_backoff: float = RETRY_BACKOFF
    run_backoff: float = RUN_BACKOFF
    run_backoff_cap: float = RUN_BACKOFF_CAP
    max_attempts: int = MAX_ATTEMPTS
    give_up_after: float = GIVE_UP_AFTER
    max_bad_answers: int = MAX_BAD_ANSWERS
    max_workers: int = MAX_WORKERS
    stuck_after: float = STUCK_AFTER
    prune_after: float | None = (
        PRUNE_AFTER  # the supervisor's retention (agent_runtime.store.prune)
    )
    model_protocol: str | None = None  # 'chat' or 'decide'; None: the agent's own
    model_name: str | None = None  # the Chat Completions model; None: the agent's own
    model_api_key: str | None = field(default=None, repr=False)  # sent as a bearer token
    crash: CrashPlan = field(default_factory=CrashPlan)

    def __post_init__(self) -> None:
        for name, (variable, example) in URL_SETTINGS.items():
            check_url(getattr(self, name), variable=f"{variable} ({name})", example=example)
        for name in ("lease", "heartbeat", "poll", "model_timeout", "tool_timeout"):
            value = getattr(self, name)
            if not math.isfinite(value) or value <= 0:
                raise ConfigError(f"{name} must be a positive number of seconds, got {value}")
        if self.heartbeat >= self.lease:
            raise ConfigError(
                f"heartbeat ({self.heartbeat}s) must be shorter than the lease ({self.lease}s), "
                "or a live worker's lease would expire between two renewals"
            )
        for name in (
            "retry_backoff",
            "run_backoff",
            "run_backoff_cap",
            "give_up_after",
            "in_flight_margin",
            "stuck_after",
        ):
            value = getattr(self, name)
            if not math.isfinite(value) or value < 0:
                raise ConfigError(f"{name} must be >= 0 seconds, got {value}")
        if self.prune_after is not None and not (
            math.isfinite(self.prune_after) and self.prune_after >= 0
        ):
            raise ConfigError(f"prune_after must be >= 0 seconds, got {self.prune_after}")
        if self.run_backoff_cap < self.run_backoff:
            raise ConfigError(
                f"run_backoff_cap ({self.run_backoff_cap}s) must be at least run_backoff "
                f"({self.run_backoff}s), the first wait"
            )
        for name in ("tool_retries", "model_retries", "max_bad_answers"):
            if getattr(self, name) < 0:
                raise ConfigError(f"{name} must be >= 0, got {getattr(self, name)}")
        for name in ("max_attempts", "max_workers"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name} must be at least 1, got {getattr(self, name)}")
        if self.model_api_key is not None and not _header_safe(self.model_api_key):
            raise ConfigError(  # never the key itself: it is a secret
                f"MODEL_API_KEY (or OPENAI_API_KEY) must be printable ASCII without spaces, "
                f"as an HTTP header carries it; the one given ({len(self.model_api_key)} "
                "characters) is not: check for a stray quote, space or line break"
            )
        if self.model_protocol not in (None, "chat", "decide"):
            raise ConfigError(
                f"MODEL_PROTOCOL must be 'chat' (Chat Completions) or 'decide' (the mock's own "
                f"protocol), got {self.model_protocol!r}"
            )

    def with_changes(self, **changes: object) -> Settings:
        """A copy with the given fields changed."""
        return replace(self, **changes)  # type: ignore[arg-type]

    @property
    def in_flight(self) -> float:
        """Seconds a tool's request may still act after it was sent, for a tool that
        declares no bound of its own: the tool timeout plus the in-flight margin."""
        return self.tool_timeout + self.in_flight_margin

    def run_backoff_rule(self, rand: Callable[[], float] = uniform) -> Backoff:
        """The waits of a run released on a resumable error, before its next claim."""
        return Backoff(base=self.run_backoff, cap=self.run_backoff_cap, rand=rand)


def check_url(value: object, *, variable: str, example: str) -> str:
    """``value`` if it is a remote URL the HTTP client can use, else a ConfigError naming
    ``variable``, the value, an ``example`` and what is wrong: one line, exit 2.

    Checked when the settings are made, so a typo never reaches a run: an unparseable URL
    would be an ``httpx.InvalidURL`` traceback, one without a scheme or a host an outage
    that never ends.
    """
    problem = _url_problem(value) if isinstance(value, str) else "not a string"
    if problem is not None:
        raise ConfigError(
            f"{variable} must be an http:// or https:// URL with a host, such as "
            f"{example}; got {value!r} ({problem})"
        )
    assert isinstance(value, str)
    return value


def url_from_env(variable: str, default: str, env: Mapping[str, str] | None = None) -> str:
    """The URL of a remote an agent reads from the environment variable ``variable``
    (unset or empty: ``default``), checked as ``CLOUD_URL`` and ``MODEL_URL`` are.

    For an agent's module, which is its own edge: call it where the module builds its
    agent, so a bad value stops the process at start (exit 2, one line naming the
    variable and what is wrong) instead of failing a run::

        agent = support_agent(url_from_env("SUPPORT_URL", "http://127.0.0.1:8003"))
    """
    env = os.environ if env is None else env
    return check_url(env.get(variable) or default, variable=variable, example=default)


def _header_safe(value: str) -> bool:
    """Whether ``value`` can be a bearer token as it is: visible ASCII, no spaces."""
    return bool(value) and all("!" <= ch <= "~" for ch in value)


def _url_problem(value: str) -> str | None:
    """What is wrong with ``value`` as a remote's base URL, or None."""
    if any(ch.isspace() or not ch.isprintable() for ch in value):
        return "whitespace or a control character"
    try:
        parsed = httpx.URL(value)
        urlsplit(value).port  # noqa: B018 -- raises for a port above 65535, which httpx allows
    except (httpx.InvalidURL, ValueError) as exc:
        return f"does not parse: {exc}"
    if parsed.scheme not in URL_SCHEMES:
        return f"scheme {parsed.scheme!r}" if parsed.scheme else "no scheme"
    if not parsed.host:
        return "no host"
    return None


def _number(env: Mapping[str, str], name: str, default: float) -> float:
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    try:
        return float(raw)
    except ValueError as exc:
        raise ConfigError(f"{name} must be a number of seconds, got {raw!r}") from exc


def _integer(env: Mapping[str, str], name: str, default: int | None) -> int | None:
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    try:
        return int(raw)
    except ValueError as exc:
        raise ConfigError(f"{name} must be a whole number, got {raw!r}") from exc


def _duration(env: Mapping[str, str], name: str) -> float | None:
    raw = env.get(name)
    return None if raw is None or raw == "" else parse_duration(raw, option=name)


def from_env(env: Mapping[str, str] | None = None, **overrides: object) -> Settings:
    """Settings from ``DATABASE_URL``, ``CLOUD_URL``, ``MODEL_URL``, ``CRASH_AT``,
    ``CRASH_SEQ``, ``LEASE``, ``HEARTBEAT``, ``POLL``, ``TOOL_TIMEOUT``,
    ``IN_FLIGHT_MARGIN``, ``MODEL_TIMEOUT``, ``RUN_BACKOFF``, ``RUN_BACKOFF_CAP``,
    ``MAX_ATTEMPTS``, ``GIVE_UP_AFTER``, ``MAX_BAD_ANSWERS``, ``STUCK_AFTER``, ``PRUNE_AFTER``,
    ``MODEL_PROTOCOL``, ``MODEL_NAME``, ``MODEL_API_KEY`` (else
    ``OPENAI_API_KEY``); keyword overrides (``None``: not given) win. ``CRASHRESUME_HOST``
    is checked here too, and read where owner tokens are made (:func:`hostid.host_identity`)."""
    env = os.environ if env is None else env
    host_identity(env)  # CRASHRESUME_HOST: refused here, at start, when no token can carry it
    crash_at = env.get("CRASH_AT") or None
    crash = CrashPlan(point=crash_at, seq=_integer(env, "CRASH_SEQ", None))
    values: dict[str, object] = {
        "database_url": env.get("DATABASE_URL") or None,
        "cloud_url": env.get("CLOUD_URL") or CLOUD_URL,
        "model_url": env.get("MODEL_URL") or MODEL_URL,
        "lease": _number(env, "LEASE", LEASE),
        "heartbeat": _number(env, "HEARTBEAT", HEARTBEAT),
        "poll": _number(env, "POLL", POLL),
        "tool_timeout": _number(env, "TOOL_TIMEOUT", TOOL_TIMEOUT),
        "in_flight_margin": _number(env, "IN_FLIGHT_MARGIN", IN_FLIGHT_MARGIN),
        "model_timeout": _number(env, "MODEL_TIMEOUT", MODEL_TIMEOUT),
        "run_backoff": _number(env, "RUN_BACKOFF", RUN_BACKOFF),
        "run_backoff_cap": _number(env, "RUN_BACKOFF_CAP", RUN_BACKOFF_CAP),
        "max_attempts": _integer(env, "MAX_ATTEMPTS", MAX_ATTEMPTS),
        "give_up_after": _number(env, "GIVE_UP_AFTER", GIVE_UP_AFTER),
        "max_bad_answers": _integer(env, "MAX_BAD_ANSWERS", MAX_BAD_ANSWERS),
        "stuck_after": _number(env, "STUCK_AFTER", STUCK_AFTER),
        "prune_after": _duration(env, "PRUNE_AFTER"),
        "model_protocol": env.get("MODEL_PROTOCOL") or None,
        "model_name": env.get("MODEL_NAME") or None,
        "model_api_key": env.get("MODEL_API_KEY") or env.get("OPENAI_API_KEY") or None,
        "crash": crash,
    }
    values.update({k: v for k, v in overrides.items() if v is not None})
    return Settings(**values)  # type: ignore[arg-type]
