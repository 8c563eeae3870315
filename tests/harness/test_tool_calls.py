"""Tools: argument validation (by hand, under generated schemas, compiled), and running calls."""

from __future__ import annotations

from typing import Any, Literal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from plangate.harness import ToolCall, ToolRetry, tool
from plangate.harness._schemas import compile_schema, validate
from plangate.harness._tools import run_tool
from tests.harness.test_tool_schemas import Step

# --- validate ------------------------------------------------------------------------------


@tool
def plan(
    title: str,
    count: int,
    ratio: float,
    urgent: bool,
    mode: Literal["fast", "careful"],
    steps: list[Step],
    tags: dict[str, int] | None = None,
) -> str:
    """Make a plan."""
    return title


VALID = {
    "title": "t",
    "count": 2,
    "ratio": 1,
    "urgent": False,
    "mode": "fast",
    "steps": [{"name": "a"}, {"name": "b", "depends_on": ["a"], "note": None}],
}


@pytest.mark.parametrize(
    ("change", "problems"),
    [
        ({}, []),
        ({"tags": {"x": 1}}, []),
        ({"tags": None}, []),
        ({"ratio": 0.25}, []),
        ({"title": None}, ["title must be a string (got null)"]),
        ({"count": True}, ["count must be an integer (got true)"]),
        ({"count": 2.0}, ["count must be an integer (got 2.0)"]),
        ({"count": "2"}, ['count must be an integer (got "2")']),
        ({"ratio": False}, ["ratio must be a number (got false)"]),
        ({"urgent": 0}, ["urgent must be a boolean (got 0)"]),
        ({"mode": "slow"}, ['mode must be one of "fast", "careful" (got "slow")']),
        ({"steps": {"name": "a"}}, ['steps must be an array (got {"name": "a"})']),
        (
            {"steps": [{"name": "a"}, {"name": 1}, {"name": "c", "depends_on": ["a", 2]}]},
            [
                "steps[1].name must be a string (got 1)",
                "steps[2].depends_on[1] must be a string (got 2)",
            ],
        ),
        ({"steps": [{}]}, ["missing required argument steps[0].name"]),
        (
            {"steps": [{"name": "a", "after": "b"}]},
            ["unknown argument steps[0].after (allowed: name, depends_on, note)"],
        ),
        ({"tags": {"x": "1"}}, ['tags: {"x": "1"} does not match any allowed form']),
        (
            {"colour": "red"},
            ["unknown argument colour (allowed: title, count, ratio, urgent, mode, steps, tags)"],
        ),
    ],
    ids=repr,
)
def test_validate(change: dict[str, Any], problems: list[str]) -> None:
    assert validate(plan.parameters, {**VALID, **change}) == problems


def test_validate_reports_every_missing_required_argument() -> None:
    assert validate(plan.parameters, {"title": "t", "ratio": 1.5}) == [
        "missing required argument count",
        "missing required argument urgent",
        "missing required argument mode",
        "missing required argument steps",
    ]


def test_validate_an_object_that_is_not_one() -> None:
    assert validate(plan.parameters, []) == ["arguments must be an object (got [])"]


def test_validate_enum_compares_types_too() -> None:
    schema = {"enum": [1, "1"]}
    assert validate(schema, 1) == []
    assert validate(schema, "1") == []
    assert validate(schema, True) == ['arguments must be one of 1, "1" (got true)']
    assert validate(schema, 1.0) == ['arguments must be one of 1, "1" (got 1.0)']


# --- validate under generated schemas ------------------------------------------------------

SCALARS = st.sampled_from(
    [{"type": "string"}, {"type": "integer"}, {"type": "number"}, {"type": "boolean"}]
)
ENUMS = st.lists(
    st.one_of(st.text(max_size=5), st.integers(-3, 3)), min_size=1, max_size=4, unique=True
).map(lambda values: {"enum": values})
LEAVES = st.one_of(SCALARS, ENUMS)
PROPERTIES = st.one_of(LEAVES, LEAVES.map(lambda leaf: {"type": "array", "items": leaf}))
NAMES = st.text(alphabet="abcdefgh_", min_size=1, max_size=6)


@st.composite
def object_schemas(draw: st.DrawFn, min_required: int = 0) -> dict[str, Any]:
    properties = draw(st.dictionaries(NAMES, PROPERTIES, min_size=max(min_required, 0), max_size=6))
    names = sorted(properties)
    required = draw(st.lists(st.sampled_from(names), unique=True) if names else st.just([]))
    if len(required) < min_required:
        required = names[:min_required]
    return {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }


def values_for(schema: dict[str, Any]) -> st.SearchStrategy[Any]:
    """Values valid under the subset of JSON schema that `@tool` produces."""
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    if "anyOf" in schema:
        return st.one_of([values_for(option) for option in schema["anyOf"]])
    kind = schema["type"]
    if kind == "array":
        return st.lists(values_for(schema["items"]), max_size=4)
    if kind == "object" and "properties" not in schema:
        return st.dictionaries(st.text(max_size=4), values_for(schema["additionalProperties"]))
    if kind == "object":
        props = schema["properties"]
        required = set(schema["required"])
        return st.fixed_dictionaries(
            {k: values_for(v) for k, v in props.items() if k in required},
            optional={k: values_for(v) for k, v in props.items() if k not in required},
        )
    return {
        "string": st.text(max_size=8),
        "integer": st.integers(),
        "number": st.one_of(st.integers(), st.floats(allow_nan=False, allow_infinity=False)),
        "boolean": st.booleans(),
        "null": st.none(),
    }[kind]


@settings(max_examples=80, deadline=None)
@given(data=st.data())
def test_validate_accepts_every_value_generated_from_the_schema(data: st.DataObject) -> None:
    schema = data.draw(object_schemas())
    value = data.draw(values_for(schema))
    assert validate(schema, value) == []


@settings(max_examples=80, deadline=None)
@given(data=st.data())
def test_validate_names_the_one_missing_required_key(data: st.DataObject) -> None:
    schema = data.draw(object_schemas(min_required=1))
    value = data.draw(values_for(schema))
    key = data.draw(st.sampled_from(schema["required"]))
    del value[key]
    assert validate(schema, value) == [f"missing required argument {key}"]


@settings(max_examples=50, deadline=None)
@given(data=st.data())
def test_validate_accepts_generated_values_for_a_real_tool_schema(data: st.DataObject) -> None:
    # Arrays of TypedDicts, `anyOf` with null, and a `dict[str, int]`, as `@tool` builds them.
    value = data.draw(values_for(plan.parameters))
    assert validate(plan.parameters, value) == []


# --- compile_schema agrees with validate ---------------------------------------------------

JSON_VALUES = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-3, 3),
        st.floats(allow_nan=False, allow_infinity=False),
        st.text(alphabet="abcdefgh_", max_size=3),
    ),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(NAMES, inner, max_size=3)),
    max_leaves=8,
)
ANY_SCHEMA = st.recursive(
    st.one_of(
        LEAVES,
        st.just({}),
        st.sampled_from([{"type": "null"}, {"type": "array"}, {"type": "object"}]),
    ),
    lambda inner: st.one_of(
        st.builds(lambda items: {"type": "array", "items": items}, inner),
        st.builds(lambda options: {"anyOf": options}, st.lists(inner, min_size=1, max_size=3)),
        st.builds(
            lambda props, required, extra: {
                "type": "object",
                "properties": props,
                "required": sorted(set(required)),
                "additionalProperties": extra,
            },
            st.dictionaries(NAMES, inner, max_size=3),
            st.lists(NAMES, max_size=3),
            st.one_of(st.booleans(), inner),
        ),
    ),
    max_leaves=6,
)


@settings(max_examples=300, deadline=None)
@given(schema=ANY_SCHEMA, value=JSON_VALUES)
def test_compiled_schema_accepts_exactly_what_validate_finds_no_problem_in(
    schema: dict[str, Any], value: Any
) -> None:
    assert compile_schema(schema)(value) == (validate(schema, value) == [])


@settings(max_examples=80, deadline=None)
@given(data=st.data())
def test_compiled_schema_accepts_values_generated_from_it(data: st.DataObject) -> None:
    schema = data.draw(object_schemas())
    value = data.draw(values_for(schema))
    assert compile_schema(schema)(value)
    assert plan.accepts(data.draw(values_for(plan.parameters)))


# --- run_tool ------------------------------------------------------------------------------


@tool
def echo(text: str, times: int = 1) -> str:
    """Repeat text."""
    return text * times


@tool
def stats(values: list[float]) -> dict[str, Any]:
    """Summarize numbers."""
    return {"n": len(values), "max": max(values, default=None), "label": "ü"}


@tool
def count(values: list[int]) -> int:
    """Count numbers."""
    return len(values)


@tool
def nothing() -> None:
    """Return nothing."""


@tool
def refuse(reason: str) -> str:
    """Always asks for a retry."""
    raise ToolRetry(f"Cannot do that: {reason}. Try todo_read first.")


@tool
def explode(kind: str) -> str:
    """Always fails."""
    if kind == "key":
        raise KeyError("missing")
    raise ValueError("boom")


@tool
async def fetch(key: str) -> dict[str, str]:
    """Fetch asynchronously."""
    return {"key": key, "source": "async"}


TOOLS = {t.name: t for t in (echo, stats, count, nothing, refuse, explode, fetch)}


def raw(name: str, arguments: str) -> ToolCall:
    return ToolCall(id="call_7", name=name, arguments=arguments)


async def test_run_tool_ok() -> None:
    call = ToolCall.of("echo", text="ab", times=2)
    result = await run_tool(call, TOOLS)
    assert (result.status, result.content, result.value) == ("ok", "abab", "abab")
    assert result.call is call
    assert result.arguments == {"text": "ab", "times": 2}


async def test_run_tool_of_an_unknown_tool_lists_the_available_tools() -> None:
    result = await run_tool(ToolCall.of("ecko", text="a"), TOOLS)
    assert result.status == "error"
    assert result.arguments is None
    assert result.content == (
        "Unknown tool 'ecko'. Available tools: count, echo, explode, fetch, nothing, refuse, "
        "stats. Call one of them."
    )
    empty = await run_tool(ToolCall.of("ecko"), {})
    assert empty.content == "Unknown tool 'ecko'. Available tools: none. Call one of them."


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (
            '{"text": ',
            "The arguments of 'echo' are not valid JSON (Expecting value at position 9). "
            "Send a JSON object that matches the tool's schema.",
        ),
        (
            "text=a",
            "The arguments of 'echo' are not valid JSON (Expecting value at position 0). "
            "Send a JSON object that matches the tool's schema.",
        ),
    ],
)
async def test_run_tool_with_malformed_json(arguments: str, message: str) -> None:
    result = await run_tool(raw("echo", arguments), TOOLS)
    assert (result.status, result.content, result.arguments) == ("error", message, None)


@pytest.mark.parametrize("arguments", ['["a"]', '"a"', "3", "null"])
async def test_run_tool_with_json_that_is_not_an_object(arguments: str) -> None:
    result = await run_tool(raw("echo", arguments), TOOLS)
    assert result.status == "error"
    assert result.content == "The arguments of 'echo' must be a JSON object."


async def test_run_tool_with_empty_arguments_means_no_arguments() -> None:
    result = await run_tool(raw("nothing", ""), TOOLS)
    assert (result.status, result.content) == ("ok", "null")


async def test_run_tool_with_invalid_arguments_lists_every_problem() -> None:
    result = await run_tool(raw("echo", '{"times": true, "loud": 1}'), TOOLS)
    assert result.status == "error"
    assert result.arguments == {"times": True, "loud": 1}
    assert result.content == (
        "Invalid arguments for 'echo': missing required argument text; "
        "times must be an integer (got true); unknown argument loud (allowed: text, times). "
        "Fix the arguments and call the tool again."
    )


async def test_run_tool_turns_a_retry_into_its_message() -> None:
    result = await run_tool(ToolCall.of("refuse", reason="no plan"), TOOLS)
    assert result.status == "error"
    assert result.content == "Cannot do that: no plan. Try todo_read first."
    assert result.arguments == {"reason": "no plan"}
    assert result.value is None


@pytest.mark.parametrize(
    ("kind", "message"),
    [
        (
            "value",
            "Tool 'explode' failed: ValueError: boom. Try different arguments or another approach.",
        ),
        (
            "key",
            "Tool 'explode' failed: KeyError: 'missing'. Try different arguments or another approach.",
        ),
    ],
)
async def test_run_tool_turns_an_exception_into_an_error_naming_its_type(
    kind: str, message: str
) -> None:
    result = await run_tool(ToolCall.of("explode", kind=kind), TOOLS)
    assert (result.status, result.content) == ("error", message)


async def test_run_tool_awaits_async_tools() -> None:
    assert fetch.is_async is True
    result = await run_tool(ToolCall.of("fetch", key="k"), TOOLS)
    assert result.status == "ok"
    assert result.value == {"key": "k", "source": "async"}
    assert result.content == '{"key":"k","source":"async"}'


@pytest.mark.parametrize(
    ("call", "content"),
    [
        (ToolCall.of("stats", values=[3, 1.5]), '{"label":"ü","max":3,"n":2}'),
        (ToolCall.of("stats", values=[]), '{"label":"ü","max":null,"n":0}'),
        (ToolCall.of("count", values=[1, 2, 3]), "3"),
        (ToolCall.of("nothing"), "null"),
    ],
)
async def test_run_tool_renders_non_string_values_as_canonical_json(
    call: ToolCall, content: str
) -> None:
    result = await run_tool(call, TOOLS)
    assert (result.status, result.content) == ("ok", content)
