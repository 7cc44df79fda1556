"""Tools as users define them: the schema the model is shown, the arguments it may send,
the effect contract, and every misuse refused with a ConfigError that says what to fix."""

from __future__ import annotations

import enum
import threading
from collections.abc import Callable
from typing import Annotated, Any, Literal, Optional
from urllib.parse import unquote

import pytest
from pydantic import Field

from agent_runtime import Call, ConfigError, InvalidArguments, Result, tool

OrderId = Annotated[str, Field(min_length=3, max_length=8, description="the order's id")]
Quantity = Annotated[int, Field(ge=1, le=5)]


class Colour(enum.Enum):
    RED = "red"
    BLUE = "blue"


def _call(run_id: str = "run-1", seq: int = 0) -> Call:
    return Call(run_id=run_id, seq=seq, key=f"{run_id}:{seq}", generation=3)


@tool(effect="keyed")
def order(
    call: Call,
    order_id: OrderId,
    quantity: Quantity = 1,
    speed: Literal["slow", "fast"] = "slow",
    note: Optional[str] = None,  # noqa: UP045 -- Optional is one of the spellings users write
    gift: str | None = None,
) -> dict[str, Any]:
    """Order something.

    Takes an order id."""
    return {"order_id": order_id, "quantity": quantity, "speed": speed, "note": note}


def test_the_schema_comes_from_the_type_hints_with_constraints_enums_and_defaults() -> None:
    spec = order.spec()

    assert spec["type"] == "function"
    function = spec["function"]
    assert function["name"] == "order"
    assert function["description"] == "Order something.\n\nTakes an order id."
    params = function["parameters"]
    assert params["type"] == "object"
    assert params["additionalProperties"] is False
    assert params["required"] == ["order_id"]  # every other argument has a default
    props = params["properties"]
    assert list(props) == ["order_id", "quantity", "speed", "note", "gift"]  # the Call is not one
    assert props["order_id"] | {"title": None} == {
        "type": "string",
        "minLength": 3,
        "maxLength": 8,
        "description": "the order's id",
        "title": None,
    }
    assert (props["quantity"]["type"], props["quantity"]["minimum"]) == ("integer", 1)
    assert (props["quantity"]["maximum"], props["quantity"]["default"]) == (5, 1)
    assert props["speed"]["enum"] == ["slow", "fast"] and props["speed"]["default"] == "slow"
    for optional in ("note", "gift"):
        assert props[optional]["anyOf"] == [{"type": "string"}, {"type": "null"}]
        assert props[optional]["default"] is None
    assert "title" not in params  # the model's class name is nobody's business


def test_name_and_description_can_be_given_instead_of_taken_from_the_function() -> None:
    def undocumented(call: Call) -> None:
        return None

    named = tool(undocumented, effect="read", name="look_up", description="Look it up.")
    bare = tool(undocumented, effect="read")

    assert (named.name, named.description) == ("look_up", "Look it up.")
    assert (bare.name, bare.description) == ("undocumented", "undocumented")
    assert bare.parameters == {"type": "object", "properties": {}, "additionalProperties": False}


def test_valid_arguments_come_back_with_their_defaults_filled_in() -> None:
    checked = order.validate({"order_id": "A-1001", "speed": "fast"})

    assert checked == {
        "order_id": "A-1001",
        "quantity": 1,
        "speed": "fast",
        "note": None,
        "gift": None,
    }
    assert order.validate(checked) == checked  # validated again before the intent: the same


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"order_id": 1001}, r"order: order_id: Input should be a valid string \(got 1001\)"),
        ({"order_id": "A-1", "quantity": "2"}, r"quantity: Input should be a valid integer"),
        ({"order_id": "A-1", "quantity": True}, r"quantity: Input should be a valid integer"),
        ({"order_id": "A-1", "quantity": 9}, r"quantity: Input should be less than or equal to 5"),
        ({"order_id": "A-"}, r"order_id: String should have at least 3 characters \(got 'A-'\)"),
        ({"order_id": "A-1", "speed": "warp"}, r"speed: Input should be 'slow' or 'fast'"),
        ({"quantity": 2}, r"^order: order_id: Field required$"),  # no "(got ...)" for a gap
        ({"order_id": "A-1", "colour": "red"}, r"colour: Extra inputs are not permitted"),
        (["A-1001"], r"order: arguments must be an object, got \['A-1001'\]"),
        (None, r"order: arguments must be an object, got None"),
    ],
)
def test_arguments_the_schema_refuses_are_invalid_naming_the_field(
    args: object, message: str
) -> None:
    with pytest.raises(InvalidArguments, match=message):
        order.validate(args)


def test_every_refused_field_is_named_at_once() -> None:
    with pytest.raises(InvalidArguments) as refused:
        order.validate({"quantity": 0, "extra": 1})

    text = str(refused.value)
    assert "order_id: Field required" in text
    assert "quantity: Input should be greater than or equal to 1" in text
    assert "extra: Extra inputs are not permitted" in text


@tool(effect="read")
def paint(call: Call, colour: Colour) -> dict[str, Any]:
    """Paint it."""
    assert isinstance(colour, Colour), f"the tool got {colour!r}, not a Colour"
    return {"painted": colour.value}


def test_an_enum_argument_accepts_the_values_its_schema_shows_the_model() -> None:
    schema = paint.parameters
    shown = schema["$defs"]["Colour"]["enum"]
    assert shown == ["red", "blue"]

    assert paint.validate({"colour": "red"}) == {"colour": "red"}  # journaled as JSON
    with pytest.raises(InvalidArguments, match="colour: Input should be 'red' or 'blue'"):
        paint.validate({"colour": "green"})


def test_a_tool_receives_its_arguments_as_the_types_its_hints_name() -> None:
    args = paint.validate({"colour": "blue"})

    assert paint(_call(), args) == Result({"painted": "blue"}, status="read")


def test_a_bare_return_value_is_created_or_read_by_the_contract() -> None:
    def answer(call: Call) -> dict[str, Any]:
        return {"seq": call.seq}

    assert tool(answer, effect="keyed")(_call(seq=4), {}) == Result({"seq": 4}, "created")
    assert tool(answer, effect="once")(_call(seq=4), {}) == Result({"seq": 4}, "created")
    assert tool(answer, effect="read")(_call(seq=4), {}) == Result({"seq": 4}, "read")


def test_a_result_keeps_the_status_the_tool_gives_it() -> None:
    @tool(effect="keyed")
    def again(call: Call) -> Result:
        return Result({"id": "t-1"}, status="already_done")

    assert again(_call(), {}) == Result({"id": "t-1"}, "already_done")


def test_a_check_finds_an_effect_as_found_or_nothing_as_none() -> None:
    sent: dict[str, str] = {}

    @tool(effect="checked")
    def send(call: Call, to: str) -> dict[str, str]:
        sent[call.key] = to
        return {"to": to}

    @send.check
    def was_sent(call: Call, to: str) -> dict[str, str] | None:
        return {"to": sent[call.key]} if call.key in sent else None

    assert send.checker is was_sent
    assert send.look(_call(), {"to": "ada"}) is None
    assert send(_call(), {"to": "ada"}) == Result({"to": "ada"}, "created")
    assert send.look(_call(), {"to": "ada"}) == Result({"to": "ada"}, "found")
    assert send.look(_call(seq=1), {"to": "ada"}) is None  # another call's key: not sent


def test_a_result_that_is_not_json_is_refused_naming_the_tool() -> None:
    @tool(effect="read")
    def clock(call: Call) -> object:
        return {"at": threading.Lock()}

    with pytest.raises(TypeError, match="tool 'clock' returned dict, which is not JSON"):
        clock(_call(), {})


def test_the_headers_percent_encode_a_run_id_that_is_not_ascii() -> None:
    call = _call(run_id="rün-日本-🚀", seq=2)

    headers = call.headers()

    assert headers["X-Fencing-Generation"] == "3"
    wire = headers["Idempotency-Key"]
    assert wire.isascii() and " " not in wire
    assert wire.startswith("r%C3%BCn-%E6%97%A5%E6%9C%AC-%F0%9F%9A%80")
    assert unquote(wire) == "rün-日本-🚀:2"
    assert _call(run_id="demo", seq=1).headers()["Idempotency-Key"] == "demo:1"


# -- misuse: each a ConfigError saying what to change ----------------------------------------


def _plain(call: Call, x: int) -> None:
    return None


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (
            lambda: tool(_plain, effect="idempotent"),  # type: ignore[call-overload]
            "effect must be one of keyed, checked, read",
        ),
        (lambda: tool(_plain, effect="keyed", retries=-1), "retries and backoff must be >= 0"),
        (lambda: tool(_plain, effect="keyed", backoff=-0.5), "retries and backoff must be >= 0"),
    ],
)
def test_a_bad_contract_is_refused(make: Any, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        make()


def _no_params() -> None:
    return None


def _var_args(call: Call, *names: str) -> None:
    return None


def _var_kwargs(call: Call, **more: str) -> None:
    return None


def _positional_only(call: Call, x: int, /) -> None:
    return None


def _unhinted(call: Call, x) -> None:  # type: ignore[no-untyped-def]
    return None


def _unresolvable(call: Call, x: NoSuchType) -> None:  # type: ignore[name-defined]  # noqa: F821
    return None


def _call_not_first(order_id: str) -> None:
    return None


def _call_keyword_only(*, call: Call, x: int) -> None:
    return None


def _unusable_type(call: Call, lock: threading.Condition) -> None:
    return None


def _no_schema(call: Call, then: Callable[[], int]) -> None:
    return None


def _unparsable(call: Call, x: int) -> None:
    return None


_unparsable.__annotations__["x"] = "list["  # what a typo in a quoted hint leaves


@pytest.mark.parametrize(
    ("fn", "message"),
    [
        (_no_params, "tool '_no_params' must take the Call as its first parameter"),
        (_var_args, "tool '_var_args': parameter 'names' must be a plain argument"),
        (_var_kwargs, "tool '_var_kwargs': parameter 'more' must be a plain argument"),
        (_positional_only, "tool '_positional_only': parameter 'x' must be a plain argument"),
        (_unhinted, "tool '_unhinted': parameter 'x' needs a type hint"),
        (_unresolvable, r"tool '_unresolvable': a type hint cannot be resolved .*NoSuchType"),
        (_call_not_first, "tool '_call_not_first' must take the Call as its first parameter"),
        (_call_keyword_only, "tool '_call_keyword_only' must take the Call as its first param"),
        (_unusable_type, r"tool '_unusable_type': parameter 'lock'.* cannot be an argument"),
        (_no_schema, r"tool '_no_schema': parameter 'then' is hinted .*Callable.* cannot be"),
        (_unparsable, r"tool '_unparsable': a type hint cannot be resolved .*never closed"),
    ],
)
def test_a_function_that_cannot_be_a_tool_is_refused_saying_why(fn: Any, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        tool(fn, effect="read")


def test_only_a_checked_tool_takes_a_check() -> None:
    keyed = tool(_plain, effect="keyed")

    with pytest.raises(ConfigError, match="tool '_plain' is 'keyed'; only a checked tool"):
        keyed.check(lambda call, x: None)
    assert keyed.checker is None


def test_a_checked_tool_without_a_check_says_how_to_add_one_when_a_restart_needs_it() -> None:
    checked = tool(_plain, effect="checked")

    with pytest.raises(ConfigError, match="checked tool '_plain' has no check; decorate one"):
        checked.look(_call(), {"x": 1})
