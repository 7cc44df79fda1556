"""Start the mocks as real uvicorn subprocesses, and stop them again.

    with start_mocks(Path("/tmp/mocks"), support=True) as mocks:
        ...  # mocks.cloud_url, mocks.model_url, mocks.support_url

Each mock runs as `python -m uvicorn mock_remotes.<cloud|model|support>:app` on a
free 127.0.0.1 port (or the one asked for), with its state under `data_dir`
(`mock-cloud.sqlite3`, `mock-model.json`, `mock-support.sqlite3`) and its log in
`mock-<name>.log`. The cloud and the model always start; the support desk only
with `support=True`. `start_mocks` returns once every one answers `/healthz`; if
any fails to come up, whatever it started is killed before the error is raised.
`stop()` (or leaving the `with` block, or interpreter exit) terminates them all,
then kills stragglers.

`python -m mock_remotes [DATA_DIR]` runs both in the foreground (`mock_remotes.cli`).
"""

from __future__ import annotations

import atexit
import logging
import os
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

import httpx

__all__ = ["MockServers", "MockStartError", "ServedMock", "start_mocks"]

logger = logging.getLogger(__name__)

STARTUP_TIMEOUT = 20.0  # seconds a mock may take to answer /healthz
STOP_TIMEOUT = 5.0  # seconds between SIGTERM and SIGKILL
POLL = 0.02  # seconds between readiness probes
PORT_ATTEMPTS = 3  # a free port picked for us can be taken before uvicorn binds it


class MockStartError(RuntimeError):
    """A mock did not come up; the message carries the tail of its log."""


def _free_port(host: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass
class ServedMock:
    """One mock running as a uvicorn subprocess."""

    name: str  # "cloud" | "model" | "support"
    url: str
    process: subprocess.Popen[bytes]
    log_path: Path

    def stop(self, timeout: float = STOP_TIMEOUT) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                pid = self.process.pid
                logger.warning("mock %s pid=%d ignored SIGTERM; killing", self.name, pid)
                self.process.kill()
                self.process.wait()
        logger.info("mock %s stopped pid=%d", self.name, self.process.pid)

    def log_tail(self, lines: int = 20) -> str:
        try:
            text = self.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])


def _spawn(
    name: str, host: str, port: int, env: dict[str, str], data_dir: Path, log_level: str
) -> ServedMock:
    log_path = data_dir / f"mock-{name}.log"
    command = [
        sys.executable,
        "-m",
        "uvicorn",
        f"mock_remotes.{name}:app",
        "--host",
        host,
        "--port",
        str(port),
        "--log-level",
        log_level,
        "--timeout-graceful-shutdown",
        "1",
    ]
    with log_path.open("ab") as log:
        process = subprocess.Popen(
            command,
            env=env,
            cwd=data_dir,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    logger.info("mock %s starting pid=%d port=%d", name, process.pid, port)
    return ServedMock(name=name, url=f"http://{host}:{port}", process=process, log_path=log_path)


def _wait_ready(mock: ServedMock, deadline: float) -> bool:
    """True once `/healthz` answers; False if the process died first. Raises on timeout."""
    with httpx.Client(base_url=mock.url, timeout=1.0) as client:
        while True:
            if mock.process.poll() is not None:
                return False
            try:
                if client.get("/healthz").status_code == 200:
                    return True
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise MockStartError(
                    f"mock {mock.name} did not answer {mock.url}/healthz in time; "
                    f"log {mock.log_path}:\n{mock.log_tail()}"
                )
            time.sleep(POLL)


@dataclass
class _Launch:
    """What it takes to (re)spawn one mock."""

    name: str
    host: str
    port: int | None  # None: a free one, picked again if it was taken meanwhile
    env: dict[str, str]
    data_dir: Path
    log_level: str

    def spawn(self) -> ServedMock:
        port = self.port or _free_port(self.host)
        return _spawn(self.name, self.host, port, self.env, self.data_dir, self.log_level)


def _start_all(launches: list[_Launch], timeout: float) -> list[ServedMock]:
    """Spawn every mock at once, then wait for each; on any failure stop them all."""
    deadline = time.monotonic() + timeout
    running: list[ServedMock] = []
    try:
        for launch in launches:
            running.append(launch.spawn())
        for index, launch in enumerate(launches):
            attempts = 1 if launch.port else PORT_ATTEMPTS
            for attempt in range(1, attempts + 1):
                mock = running[index]
                if _wait_ready(mock, deadline):
                    break
                mock.stop()
                if attempt == attempts:
                    raise MockStartError(
                        f"mock {mock.name} exited during startup (code "
                        f"{mock.process.returncode}); log {mock.log_path}:\n{mock.log_tail()}"
                    )
                running[index] = launch.spawn()  # most likely the port was taken: retry
    except BaseException:
        for mock in running:
            mock.stop()
        raise
    return running


@dataclass
class MockServers:
    """The mocks running as subprocesses, and helpers to poke them."""

    cloud: ServedMock
    model: ServedMock
    data_dir: Path
    support: ServedMock | None = None  # started by start_mocks(..., support=True)
    _client: httpx.Client = field(default_factory=lambda: httpx.Client(timeout=10.0))

    @property
    def running(self) -> list[ServedMock]:
        """Every mock this handle started."""
        return [self.cloud, self.model, *([self.support] if self.support else [])]

    @property
    def cloud_url(self) -> str:
        return self.cloud.url

    @property
    def model_url(self) -> str:
        return self.model.url

    @property
    def support_url(self) -> str:
        if self.support is None:
            raise RuntimeError(
                "the support desk was not started; use start_mocks(..., support=True)"
            )
        return self.support.url

    def reset(self) -> None:
        """Wipe every mock: resources, keys, generations, counters, tickets, mail, faults."""
        self._post(f"{self.cloud_url}/admin/reset", {})
        self._post(f"{self.model_url}/admin/reset", {})
        if self.support is not None:
            self._post(f"{self.support_url}/admin/reset", {})

    def resources(self, run: str | None = None) -> dict[str, Any]:
        """The cloud's `GET /v1/resources` body."""
        params = {} if run is None else {"run": run}
        return self._get(f"{self.cloud_url}/v1/resources", params)

    def calls(self, run_id: str) -> int:
        """How many requests (decide, chat completions) the model counted for `run_id`."""
        calls: int = self._get(f"{self.model_url}/v1/calls/{run_id}")["calls"]
        return calls

    def call_counts(self) -> dict[str, Any]:
        """The model's `GET /v1/calls` body: `{"total": n, "by_run": {...}}`."""
        return self._get(f"{self.model_url}/v1/calls")

    def set_cloud_faults(self, **knobs: float) -> dict[str, Any]:
        """Replace cloud knobs: fail_before, drop_after, latency, hang."""
        return self._post(f"{self.cloud_url}/admin/faults", knobs)

    def set_model_faults(self, **knobs: float) -> dict[str, Any]:
        """Replace model knobs: malformed, unknown_tool, invalid_args, latency."""
        return self._post(f"{self.model_url}/admin/faults", knobs)

    def set_support_faults(self, **knobs: float) -> dict[str, Any]:
        """Replace support desk knobs: fail_before, drop_after, latency, hang."""
        return self._post(f"{self.support_url}/admin/faults", knobs)

    def deliveries(self, message_id: str | None = None) -> list[dict[str, Any]]:
        """The support desk's deliveries, in order (of one `message_id`, if given)."""
        params = {} if message_id is None else {"message_id": message_id}
        found: list[dict[str, Any]] = self._get(f"{self.support_url}/v1/messages", params)[
            "messages"
        ]
        return found

    def tickets(self, run: str | None = None) -> list[dict[str, Any]]:
        """The support desk's tickets, in filing order (of one `run`, if given)."""
        params = {} if run is None else {"run": run}
        found: list[dict[str, Any]] = self._get(f"{self.support_url}/v1/tickets", params)["tickets"]
        return found

    def stop(self) -> None:
        """Terminate every mock (SIGKILL after STOP_TIMEOUT); safe to call twice."""
        atexit.unregister(self.stop)
        self._client.close()
        if self.support is not None:
            self.support.stop()
        self.model.stop()
        self.cloud.stop()

    def __enter__(self) -> MockServers:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def _get(self, url: str, params: dict[str, str] | None = None) -> dict[str, Any]:
        response = self._client.get(url, params=params)
        response.raise_for_status()
        body: dict[str, Any] = response.json()
        return body

    def _post(self, url: str, body: dict[str, Any]) -> dict[str, Any]:
        response = self._client.post(url, json=body)
        response.raise_for_status()
        answer: dict[str, Any] = response.json()
        return answer


def start_mocks(
    data_dir: str | os.PathLike[str],
    *,
    host: str = "127.0.0.1",
    cloud_port: int | None = None,
    model_port: int | None = None,
    cloud_latency: float = 0.0,
    model_latency: float = 0.0,
    persist_model: bool = True,
    log_level: str = "warning",
    startup_timeout: float = STARTUP_TIMEOUT,
    support: bool = False,
    support_port: int | None = None,
    support_latency: float = 0.0,
) -> MockServers:
    """Start the cloud and the model (and the support desk) under uvicorn; return once all answer.

    State goes under `data_dir` (created if missing): the cloud's SQLite file, the
    model's call counts when `persist_model` (so a restart keeps them), and with
    `support` the support desk's SQLite file. Ports default to free ones.
    Nothing is left running if this raises.
    """
    directory = Path(data_dir).resolve()
    directory.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    env["MOCK_CLOUD_DB"] = str(directory / "mock-cloud.sqlite3")
    env["MOCK_CLOUD_LATENCY"] = str(cloud_latency)
    env["MOCK_MODEL_LATENCY"] = str(model_latency)
    env.pop("MOCK_MODEL_STATE", None)
    if persist_model:
        env["MOCK_MODEL_STATE"] = str(directory / "mock-model.json")
    env["MOCK_SUPPORT_DB"] = str(directory / "mock-support.sqlite3")
    env["MOCK_SUPPORT_LATENCY"] = str(support_latency)
    launches = [
        _Launch("cloud", host, cloud_port, env, directory, log_level),
        _Launch("model", host, model_port, env, directory, log_level),
    ]
    if support:
        launches.append(_Launch("support", host, support_port, env, directory, log_level))
    cloud, model, *desk = _start_all(launches, startup_timeout)
    servers = MockServers(
        cloud=cloud, model=model, data_dir=directory, support=desk[0] if desk else None
    )
    atexit.register(servers.stop)
    logger.info(
        "mocks ready cloud=%s model=%s support=%s data=%s",
        cloud.url,
        model.url,
        desk[0].url if desk else "-",
        directory,
    )
    return servers
