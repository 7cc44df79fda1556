"""The mock model: the fixed plan, call counts in every name, fault knobs, persistence."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from mock_remotes import MockServers, Model, model_transport
from mock_remotes.cloudrecords import Kind, validate_args
from mock_remotes.errors import InvalidArgs

SERVER_RESULT = {"id": "i-0000007", "kind": "server", "status": "created", "ip": "10.0.0.7"}
DATABASE_RESULT = {"id": "db-0000003", "kind": "database", "status": "created"}
DNS_RESULT = {"id": "dns-0000002", "kind": "dns_record", "status": "created"}
RESULTS = {
    "create_server": SERVER_RESULT,
    "create_database": DATABASE_RESULT,
    "create_dns_record": DNS_RESULT,
}
KIND_OF: dict[str, Kind] = {
    "create_server": "server",
    "create_database": "database",
    "create_dns_record": "dns_record",
}


def decide(client: httpx.Client, history: list[dict[str, Any]], run: str = "run") -> Any:
    response = client.post("/v1/decide", json={"run_id": run, "history": history})
    assert response.status_code == 200
    return response.json()


def step(seq: int, decision: dict[str, Any]) -> dict[str, Any]:
    tool = decision["tool"]
    return {"seq": seq, "tool": tool, "args": decision["args"], "result": RESULTS[tool]}


def run_to_done(client: httpx.Client, run: str = "run") -> list[dict[str, Any]]:
    history: list[dict[str, Any]] = []
    decisions = []
    while True:
        decision = decide(client, history, run)
        decisions.append(decision)
        if decision["tool"] == "done":
            return decisions
        history.append(step(len(history), decision))


# -- the plan ------------------------------------------------------------------------------------


def test_a_crash_free_run_takes_four_calls_named_after_their_call_count(
    model_http: httpx.Client, model: Model
) -> None:
    decisions = run_to_done(model_http)

    assert decisions == [
        {"tool": "create_server", "args": {"name": "srv-1", "size": "small", "region": "local-1"}},
        {
            "tool": "create_database",
            "args": {"name": "db-2", "engine": "postgres", "server_id": "i-0000007"},
        },
        {
            "tool": "create_dns_record",
            "args": {"name": "app-3.example.test", "type": "A", "value": "10.0.0.7"},
        },
        {"tool": "done", "args": {}},
    ]
    assert model.calls("run") == 4


def test_every_decision_passes_the_cloud_argument_checks(model_http: httpx.Client) -> None:
    for decision in run_to_done(model_http)[:-1]:
        validate_args(KIND_OF[decision["tool"]], decision["args"])


def test_asking_again_about_the_same_step_shows_the_second_call_in_the_name(
    model_http: httpx.Client,
) -> None:
    first = decide(model_http, [])
    second = decide(model_http, [])

    assert first["args"]["name"] == "srv-1"
    assert second == {**first, "args": {**first["args"], "name": "srv-2"}}


def test_calls_are_counted_per_run(model_http: httpx.Client) -> None:
    run_to_done(model_http, "run-a")
    decide(model_http, [], "run-b")

    assert model_http.get("/v1/calls").json() == {
        "total": 5,
        "by_run": {"run-a": 4, "run-b": 1},
    }
    assert model_http.get("/v1/calls/run-b").json() == {"run_id": "run-b", "calls": 1}
    assert model_http.get("/v1/calls/never").json() == {"run_id": "never", "calls": 0}


def test_each_run_names_things_from_its_own_count(model_http: httpx.Client) -> None:
    decide(model_http, [], "run-a")
    decide(model_http, [], "run-a")

    assert decide(model_http, [], "run-b")["args"]["name"] == "srv-1"


# -- refused requests ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "body",
    [
        [],
        {"history": []},
        {"run_id": "", "history": []},
        {"run_id": "run"},
        {"run_id": "run", "history": {}},
        {"run_id": "run", "history": [{"seq": 0, "tool": "create_server"}]},
        {"run_id": "run", "history": [{"seq": "0", "tool": "x", "args": {}, "result": {}}]},
    ],
)
def test_malformed_requests_are_refused_with_422_and_not_counted(
    model_http: httpx.Client, model: Model, body: object
) -> None:
    response = model_http.post("/v1/decide", json=body)

    assert response.status_code == 422
    assert response.json()["error"] == "invalid_request"
    assert model.call_counts()["total"] == 0


def test_a_body_that_is_not_json_is_refused_with_422(model_http: httpx.Client) -> None:
    assert model_http.post("/v1/decide", content=b"run_id=run").status_code == 422


def test_a_history_whose_server_has_no_id_is_refused(model_http: httpx.Client) -> None:
    server = {"seq": 0, "tool": "create_server", "args": {}, "result": {"status": "created"}}

    response = model_http.post("/v1/decide", json={"run_id": "run", "history": [server]})

    assert response.status_code == 422
    assert "id" in response.json()["detail"]


# -- fault knobs -----------------------------------------------------------------------------------


def test_malformed_answers_alternate_broken_json_and_json_without_a_tool(
    model_http: httpx.Client, model: Model
) -> None:
    model_http.post("/admin/faults", json={"malformed": 2})

    broken = model_http.post("/v1/decide", json={"run_id": "run", "history": []})
    toolless = model_http.post("/v1/decide", json={"run_id": "run", "history": []})
    healthy = decide(model_http, [])

    assert broken.status_code == 200
    with pytest.raises(json.JSONDecodeError):
        broken.json()
    assert toolless.status_code == 200
    assert "tool" not in toolless.json()
    assert healthy["args"]["name"] == "srv-3"
    assert model.calls("run") == 3


def test_unknown_tool_answers_name_a_tool_that_does_not_exist(
    model_http: httpx.Client, model: Model
) -> None:
    model.set_faults(unknown_tool=1)

    assert decide(model_http, []) == {"tool": "delete_everything", "args": {}}
    assert decide(model_http, [])["tool"] == "create_server"


def test_invalid_args_answers_name_the_right_tool_with_arguments_the_cloud_refuses(
    model_http: httpx.Client, model: Model
) -> None:
    model.set_faults(invalid_args=2)

    gigantic = decide(model_http, [])
    nameless = decide(model_http, [])

    assert gigantic["tool"] == nameless["tool"] == "create_server"
    assert gigantic["args"]["size"] == "gigantic"
    assert "name" not in nameless["args"]
    for bad in (gigantic, nameless):
        with pytest.raises(InvalidArgs):
            validate_args("server", bad["args"])


def test_invalid_args_on_a_final_answer_calls_the_first_tool_with_nothing(
    model_http: httpx.Client, model: Model
) -> None:
    """A final answer's arguments are the runtime's to keep, never refused: the fault has
    to break a call instead, or its bad answer would be a different final answer."""
    history = [step(seq, d) for seq, d in enumerate(run_to_done(model_http, "ok")[:-1])]
    model.set_faults(invalid_args=1)

    spoiled = decide(model_http, history)

    assert spoiled == {"tool": "create_server", "args": {}}
    with pytest.raises(InvalidArgs):
        validate_args("server", spoiled["args"])


def test_several_faults_are_served_in_order_and_each_answer_counts_as_a_call(
    model_http: httpx.Client, model: Model
) -> None:
    model.set_faults(malformed=1, unknown_tool=1, invalid_args=1)

    answers = [model_http.post("/v1/decide", json={"run_id": "r", "history": []}) for _ in range(4)]

    assert answers[1].json()["tool"] == "delete_everything"
    assert answers[2].json()["args"]["size"] == "gigantic"
    assert answers[3].json()["args"]["name"] == "srv-4"
    assert model.calls("r") == 4
    assert model_http.get("/admin/faults").json() == {
        "malformed": 0,
        "unknown_tool": 0,
        "invalid_args": 0,
        "latency": 0.0,
    }


def test_latency_beyond_the_read_timeout_counts_the_call_then_times_out(
    model_http: httpx.Client, model: Model
) -> None:
    model_http.post("/admin/faults", json={"latency": 60})
    started = time.monotonic()

    with pytest.raises(httpx.ReadTimeout):
        model_http.post("/v1/decide", json={"run_id": "run", "history": []}, timeout=1.0)

    assert time.monotonic() - started < 1.0
    assert model.calls("run") == 1


@pytest.mark.parametrize("knobs", [{"broken": 1}, {"malformed": -2}, {"unknown_tool": 1.5}, []])
def test_bad_fault_knobs_are_refused_with_422(model_http: httpx.Client, knobs: object) -> None:
    assert model_http.post("/admin/faults", json=knobs).status_code == 422


def test_reset_forgets_counts_and_faults(model_http: httpx.Client, model: Model) -> None:
    decide(model_http, [])
    model.set_faults(malformed=5)

    model_http.post("/admin/reset")

    assert model.call_counts() == {"total": 0, "by_run": {}}
    assert model.faults.malformed == 0
    assert decide(model_http, [])["args"]["name"] == "srv-1"


# -- persistence -----------------------------------------------------------------------------------


def test_counts_survive_a_restart_when_kept_in_a_state_file(tmp_path: Path) -> None:
    state = tmp_path / "model.json"
    with httpx.Client(transport=model_transport(Model(state)), base_url="http://m") as client:
        decide(client, [])
        decide(client, [], "other")

    with httpx.Client(transport=model_transport(Model(state)), base_url="http://m") as client:
        assert decide(client, [])["args"]["name"] == "srv-2"
        assert client.get("/v1/calls").json() == {
            "total": 3,
            "by_run": {"run": 2, "other": 1},
        }


def test_reset_empties_the_state_file_too(tmp_path: Path) -> None:
    state = tmp_path / "model.json"
    Model(state).decide("run", [])
    Model(state).reset()

    assert Model(state).calls("run") == 0


def test_without_a_state_file_a_new_model_starts_from_zero() -> None:
    Model().decide("run", [])

    assert Model().calls("run") == 0


def test_a_corrupt_state_file_is_refused_with_a_way_out(tmp_path: Path) -> None:
    state = tmp_path / "model.json"
    state.write_text('{"by_run": {"run": "many"}}', encoding="utf-8")

    with pytest.raises(ValueError, match="delete it"):
        Model(state)


# -- uvicorn ---------------------------------------------------------------------------------------


def test_the_uvicorn_model_counts_calls_and_serves_faults(mock_servers: MockServers) -> None:
    mock_servers.reset()
    mock_servers.set_model_faults(unknown_tool=1)

    with httpx.Client(base_url=mock_servers.model_url) as client:
        spoiled = decide(client, [], "uv")
        healthy = decide(client, [], "uv")

    assert spoiled["tool"] == "delete_everything"
    assert healthy["args"]["name"] == "srv-2"
    assert mock_servers.calls("uv") == 2
