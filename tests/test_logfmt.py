"""How a log line shows a call's result (``logfmt.brief``)."""

from __future__ import annotations

from agent_runtime.logfmt import brief


def test_a_result_with_an_id_is_shown_by_its_id() -> None:
    assert brief({"id": "vm-1", "ip": "10.0.0.1"}) == "vm-1"
    assert brief({"id": 7}) == '{"id":7}'  # not a string: the JSON


def test_a_result_is_compact_json_cut_to_its_width() -> None:
    assert brief({"b": 1, "a": [1, 2]}) == '{"a":[1,2],"b":1}'
    exact = {"k": "x" * 72}  # {"k":"..."} is 80 characters
    assert len(brief(exact)) == 80 and brief(exact).endswith('x"}')
    long = {"error": "RemoteRejected", "message": "y" * 500}
    assert brief(long) == brief(long, 80) and len(brief(long)) == 80
    assert brief(long).startswith('{"error":"RemoteRejected","message":"yyy')
    assert brief(long).endswith("y...")
    assert brief("z" * 10, width=8) == '"zzzz...'
