"""Canonical JSON and argument parsing: the same results as the `json` module's own calls."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from plangate.harness._messages import (
    canonical_arguments_text,
    canonical_json,
    parse_json,
    parse_object,
)

scalars = st.none() | st.booleans() | st.integers() | st.floats() | st.text()
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)
whitespace = st.text(alphabet=" \t\n\r", max_size=3)


def reference(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def same(a: Any, b: Any) -> bool:
    """Equal, where NaN equals NaN."""
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    return bool(a == b)


@settings(max_examples=300)
@given(json_values)
def test_canonical_json_writes_what_json_dumps_writes(value: Any) -> None:
    assert canonical_json(value) == reference(value)


def test_canonical_json_sorts_keys_and_keeps_unicode() -> None:
    assert canonical_json({"b": [1, 2.5], "a": "é"}) == '{"a":"é","b":[1,2.5]}'
    assert canonical_json("x") == '"x"' and canonical_json(3) == "3"


def test_canonical_json_refuses_what_json_cannot_write() -> None:
    for _ in range(3):  # a failure leaves nothing behind in the shared encoder
        with pytest.raises(TypeError, match="Object of type object is not JSON serializable"):
            canonical_json({"a": [object()]})
        assert canonical_json({"a": [1]}) == '{"a":[1]}'
    looped: list[Any] = []
    looped.append(looped)
    with pytest.raises(RecursionError):
        canonical_json(looped)


@settings(max_examples=300)
@given(json_values, whitespace, whitespace)
def test_parse_json_reads_what_json_loads_reads(value: Any, before: str, after: str) -> None:
    text = before + json.dumps(value) + after
    assert same(parse_json(text), json.loads(text))


@settings(max_examples=300)
@given(st.text(alphabet='{}[]":,0123456789.eE+-truefalsn \t', max_size=12))
def test_parse_json_fails_where_json_loads_fails(text: str) -> None:
    try:
        expected = json.loads(text)
    except json.JSONDecodeError as error:
        with pytest.raises(json.JSONDecodeError) as raised:
            parse_json(text)
        assert (raised.value.msg, raised.value.pos) == (error.msg, error.pos)
    else:
        assert same(parse_json(text), expected)


def test_parse_object_and_canonical_arguments() -> None:
    assert parse_object("") == {} and parse_object(' {"a": 1} ') == {"a": 1}
    assert parse_object("[1]") is None and parse_object("{") is None
    assert parse_object('{"a": 1} x') is None  # extra data, as json.loads says
    assert canonical_arguments_text('{ "b": 1, "a": 2 }') == '{"a":2,"b":1}'
    assert canonical_arguments_text("not json") == "not json"
