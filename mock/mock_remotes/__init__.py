"""Mock remotes of the agent runtime: a cloud and a model, standalone or in-process.

- `Cloud` / `Model`: the behaviour (the cloud's state in SQLite, durable);
- `cloud_transport` / `model_transport`: socket-free httpx transports over them;
- `FaultTransport`: network faults (connect error, read timeout after acting);
- `start_mocks`: both as uvicorn subprocesses (`mock_remotes.cloud:app`,
  `mock_remotes.model:app`), stopped by `MockServers.stop()`.

The FastAPI apps (`mock_remotes.cloud.create_app`, `mock_remotes.model.create_app`)
are not imported here, so using the cores and transports does not load FastAPI.
"""

from __future__ import annotations

from mock_remotes.cloudcore import Answer, Cloud, CloudRecord, Outcome, run_of
from mock_remotes.errors import MockError
from mock_remotes.faults import CloudFaults, ModelFaults
from mock_remotes.inprocess import FaultTransport, cloud_transport, model_transport
from mock_remotes.modelcore import Model, Step
from mock_remotes.serve import MockServers, MockStartError, start_mocks

__all__ = [
    "Answer",
    "Cloud",
    "CloudFaults",
    "CloudRecord",
    "FaultTransport",
    "MockError",
    "MockServers",
    "MockStartError",
    "Model",
    "ModelFaults",
    "Outcome",
    "Step",
    "cloud_transport",
    "model_transport",
    "run_of",
    "start_mocks",
]
