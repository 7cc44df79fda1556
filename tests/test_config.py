"""Settings are checked where they are made, with messages that say what to fix."""

from __future__ import annotations

import pytest

import agent_runtime.crash
import crashresume
from agent_runtime.config import Settings, from_env
from agent_runtime.crash import CRASH_POINTS, CrashPlan, InjectedCrash, raise_crash
from agent_runtime.errors import ConfigError


def test_defaults_are_the_seeds_lease_poll_and_heartbeat() -> None:
    s = Settings()
    assert (s.lease, s.poll, s.heartbeat) == (12.0, 3.0, 3.0)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"heartbeat": 12.0}, "heartbeat .* must be shorter than the lease"),
        ({"heartbeat": 20.0, "lease": 10.0}, "must be shorter than the lease"),
        ({"lease": -1.0}, "lease must be a positive number"),
        ({"poll": 0.0}, "poll must be a positive number"),
        ({"heartbeat": float("nan")}, "heartbeat must be a positive number"),
        ({"max_workers": 0}, "max_workers must be at least 1"),
        ({"tool_retries": -1}, "tool_retries must be >= 0"),
    ],
)
def test_bad_settings_are_refused_with_a_clear_message(
    changes: dict[str, float], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        Settings(**changes)  # type: ignore[arg-type]


def test_environment_values_that_are_not_numbers_are_refused() -> None:
    with pytest.raises(ConfigError, match="LEASE must be a number of seconds, got 'soon'"):
        from_env({"LEASE": "soon"})


def test_an_unknown_crash_point_lists_every_valid_name() -> None:
    with pytest.raises(ConfigError) as info:
        from_env({"CRASH_AT": "after_lunch"})
    for name in CRASH_POINTS:
        assert name in str(info.value)


def test_a_crash_plan_fires_only_at_its_point_and_step() -> None:
    fired: list[tuple[str, int]] = []
    plan = CrashPlan(point="after_call", seq=1, action=lambda p, s: fired.append((p, s)))
    for seq in range(3):
        for point in CRASH_POINTS:
            plan.reached(point, seq)
    assert fired == [("after_call", 1)]


@pytest.mark.parametrize(
    "url",
    [
        "::::",
        "not-a-url",
        "127.0.0.1:8001",  # no scheme at all
        "localhost:8001",  # parses with the scheme 'localhost'
        "ftp://127.0.0.1:8001",
        "http://",
        "http://:8001",
        "https:///v1",
        "http://[::1",
        "http://127.0.0.1:99999",
        "http://exa mple.com",
        "http://127.0.0.1:8001\n",
    ],
)
@pytest.mark.parametrize(
    ("field", "variable"), [("cloud_url", "CLOUD_URL"), ("model_url", "MODEL_URL")]
)
def test_a_remote_url_that_is_not_an_http_url_with_a_host_is_refused(
    field: str, variable: str, url: str
) -> None:
    with pytest.raises(ConfigError) as info:
        Settings(**{field: url})  # type: ignore[arg-type]
    message = str(info.value)
    assert variable in message and repr(url) in message
    assert "\n" not in message
    with pytest.raises(ConfigError, match=variable):
        from_env({variable: url})


@pytest.mark.parametrize(
    "url", ["http://127.0.0.1:8001", "https://cloud.example/api", "http://[::1]:8002/", "http://h"]
)
def test_http_and_https_urls_with_a_host_are_accepted(url: str) -> None:
    settings = from_env({"CLOUD_URL": url, "MODEL_URL": url})
    assert (settings.cloud_url, settings.model_url) == (url, url)


def test_the_runtimes_injected_crash_is_not_the_harness_simulated_crash() -> None:
    assert issubclass(InjectedCrash, BaseException) and not issubclass(InjectedCrash, Exception)
    assert InjectedCrash.__name__ != crashresume.SimulatedCrash.__name__
    assert not issubclass(InjectedCrash, crashresume.SimulatedCrash)
    assert not hasattr(agent_runtime.crash, "SimulatedCrash")  # one name each, no alias
    plan = CrashPlan(point="after_call", seq=1, action=raise_crash)
    plan.reached("after_call", 0)  # another step: nothing happens
    with pytest.raises(InjectedCrash, match="injected crash at after_call seq=1"):
        plan.reached("after_call", 1)
