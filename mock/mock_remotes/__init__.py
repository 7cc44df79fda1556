"""Mock remotes of the agent runtime: a cloud, a model, a support desk; standalone or in-process.

- `Cloud` / `Model` / `Support`: the behaviour (the cloud's and the desk's state in
  SQLite, durable); the model answers `/v1/decide` and OpenAI Chat Completions;
- `cloud_transport` / `model_transport` / `support_transport`: socket-free httpx
  transports over them;
- `FaultTransport`: network faults (connect error, read timeout after acting);
- `start_mocks`: them as uvicorn subprocesses (`mock_remotes.cloud:app`,
  `mock_remotes.model:app`, with `support=True` `mock_remotes.support:app`),
  stopped by `MockServers.stop()`.

The FastAPI apps (`mock_remotes.cloud.create_app`, `mock_remotes.model.create_app`,
`mock_remotes.support.create_app`) are not imported here, so using the cores and
transports does not load FastAPI.
"""

from __future__ import annotations

from mock_remotes.cloudcore import Cloud
from mock_remotes.cloudrecords import Answer, CloudRecord, Outcome, run_of
from mock_remotes.errors import MockError
from mock_remotes.faults import CloudFaults, ModelFaults, SupportFaults
from mock_remotes.inprocess import (
    FaultTransport,
    cloud_transport,
    model_transport,
    support_transport,
)
from mock_remotes.modelcore import Model, Step
from mock_remotes.serve import MockServers, MockStartError, start_mocks
from mock_remotes.supportcore import Delivery, DeskAnswer, Support, Ticket

__all__ = [
    "Answer",
    "Cloud",
    "CloudFaults",
    "CloudRecord",
    "Delivery",
    "DeskAnswer",
    "FaultTransport",
    "MockError",
    "MockServers",
    "MockStartError",
    "Model",
    "ModelFaults",
    "Outcome",
    "Step",
    "Support",
    "SupportFaults",
    "Ticket",
    "cloud_transport",
    "model_transport",
    "run_of",
    "start_mocks",
    "support_transport",
]
