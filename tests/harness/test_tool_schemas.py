"""Tools: schemas from type hints and docstrings, and what fails at decoration time."""

from __future__ import annotations

import types
from typing import Any, Literal, NotRequired, Required, TypedDict

import pytest

from plangate.harness import Tool, tool
from plangate.harness._schemas import parse_docstring, type_schema


class Step(TypedDict):
    """A TypedDict in a module with postponed annotations (this one)."""

    name: str
    depends_on: NotRequired[list[str]]
    note: NotRequired[str | None]


class Options(TypedDict, total=False):
    """Optional by default, with one key forced back to required."""

    limit: Required[int]
    order: Literal["asc", "desc"]


class Named(TypedDict):
    """Every key required."""

    name: str


class NamedWithNote(Named, total=False):
    """Adds an optional key; the inherited one stays required."""

    note: str


class Limits(TypedDict, total=False):
    """Every key optional."""

    limit: int


class LimitsWithOrder(Limits):
    """Adds a required key; the inherited one stays optional."""

    order: str


EAGER_SOURCE = '''
from typing import Literal, NotRequired, TypedDict

class Filter(TypedDict):
    field: str
    value: float
    negate: NotRequired[bool]

def apply(filters: list[Filter], mode: Literal["all", "any"] = "all") -> int:
    """Apply filters.

    Args:
        filters: The filters to apply.
    """
    return len(filters)
'''


def eager_module() -> types.ModuleType:
    """A module without postponed annotations: its hints are real objects, not strings."""
    module = types.ModuleType("eager_tool_types")
    exec(compile(EAGER_SOURCE, "<eager>", "exec", dont_inherit=True), module.__dict__)
    return module


# --- schemas -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("hint", "schema"),
    [
        (str, {"type": "string"}),
        (int, {"type": "integer"}),
        (float, {"type": "number"}),
        (bool, {"type": "boolean"}),
        (Literal["a", "b"], {"enum": ["a", "b"]}),
        (Literal[1, 2], {"enum": [1, 2]}),
        (list[int], {"type": "array", "items": {"type": "integer"}}),
        (
            list[list[str]],
            {"type": "array", "items": {"type": "array", "items": {"type": "string"}}},
        ),
        (list, {"type": "array"}),
        (dict[str, float], {"type": "object", "additionalProperties": {"type": "number"}}),
        (dict, {"type": "object"}),
        (int | None, {"anyOf": [{"type": "integer"}, {"type": "null"}]}),
        (int | str, {"anyOf": [{"type": "integer"}, {"type": "string"}]}),
        (Any, {}),
    ],
    ids=repr,
)
def test_type_schema(hint: Any, schema: dict[str, Any]) -> None:
    assert type_schema(hint) == schema


def test_type_schema_of_a_typeddict_with_postponed_annotations() -> None:
    assert type_schema(Step) == {
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "depends_on": {"type": "array", "items": {"type": "string"}},
            "note": {"anyOf": [{"type": "string"}, {"type": "null"}]},
        },
        "required": ["name"],
        "additionalProperties": False,
    }


def test_type_schema_of_a_non_total_typeddict_with_a_required_key() -> None:
    assert type_schema(Options) == {
        "type": "object",
        "properties": {"limit": {"type": "integer"}, "order": {"enum": ["asc", "desc"]}},
        "required": ["limit"],
        "additionalProperties": False,
    }


@pytest.mark.parametrize(
    ("hint", "required"),
    [(NamedWithNote, ["name"]), (LimitsWithOrder, ["order"])],
    ids=["total-base", "partial-base"],
)
def test_inherited_typeddict_keys_keep_the_totality_of_their_own_class(
    hint: type, required: list[str]
) -> None:
    assert hint.__required_keys__ == frozenset(required)  # type: ignore[attr-defined]
    assert type_schema(hint)["required"] == required


def test_type_schema_of_a_typeddict_with_eager_annotations() -> None:
    assert type_schema(eager_module().Filter) == {
        "type": "object",
        "properties": {
            "field": {"type": "string"},
            "value": {"type": "number"},
            "negate": {"type": "boolean"},
        },
        "required": ["field", "value"],
        "additionalProperties": False,
    }


def test_type_schema_rejects_an_unsupported_hint() -> None:
    with pytest.raises(TypeError, match=r"unsupported type hint for a tool parameter: set\[int\]"):
        type_schema(set[int])


def test_tool_builds_name_description_and_schema_from_hints_and_docstring() -> None:
    @tool
    def search_spans(
        service: str,
        steps: list[Step],
        kind: Literal["server", "client"] = "server",
        limit: int | None = None,
        threshold: float = 0.5,
        include_errors: bool = False,
    ) -> str:
        """Find spans of a service.

        Only spans of the last hour are searched.

        Args:
            service: The service name,
                as shown in the service map.
            steps: What to do with them.
            kind (str): Which side of the call.
            limit: At most this many spans; no limit when null.

        Returns:
            The spans, as JSON.
        """
        return ""

    assert isinstance(search_spans, Tool)
    assert search_spans.name == "search_spans"
    assert search_spans.description == (
        "Find spans of a service.\n\nOnly spans of the last hour are searched."
    )
    assert search_spans.is_async is False
    assert search_spans.parameters == {
        "type": "object",
        "properties": {
            "service": {
                "type": "string",
                "description": "The service name, as shown in the service map.",
            },
            "steps": {
                "type": "array",
                "items": type_schema(Step),
                "description": "What to do with them.",
            },
            "kind": {
                "enum": ["server", "client"],
                "description": "Which side of the call.",
                "default": "server",
            },
            "limit": {
                "anyOf": [{"type": "integer"}, {"type": "null"}],
                "description": "At most this many spans; no limit when null.",
            },
            "threshold": {"type": "number", "default": 0.5},
            "include_errors": {"type": "boolean", "default": False},
        },
        "required": ["service", "steps"],
        "additionalProperties": False,
    }
    assert search_spans.definition.parameters == search_spans.parameters


def test_tool_defined_in_a_module_without_postponed_annotations() -> None:
    apply = tool(eager_module().apply)
    assert apply.parameters == {
        "type": "object",
        "properties": {
            "filters": {
                "type": "array",
                "items": type_schema(eager_module().Filter),
                "description": "The filters to apply.",
            },
            "mode": {"enum": ["all", "any"], "default": "all"},
        },
        "required": ["filters"],
        "additionalProperties": False,
    }


def test_tool_options_override_name_and_description() -> None:
    @tool(name="lookup", description="Look a thing up.")
    def find(key: str) -> str:
        """Ignored summary."""
        return key

    assert (find.name, find.description) == ("lookup", "Look a thing up.")


def test_parse_docstring_joins_multi_line_arg_descriptions() -> None:
    doc = (
        "Summary line.\n"
        "\n"
        "Args:\n"
        "    query: A jq expression\n"
        "        over the stored result,\n"
        "        evaluated in a sandbox.\n"
        "    limit (int, optional): How many.\n"
        "\n"
        "Raises:\n"
        "    ValueError: never.\n"
    )
    assert parse_docstring(doc) == (
        "Summary line.",
        {
            "query": "A jq expression over the stored result, evaluated in a sandbox.",
            "limit": "How many.",
        },
    )


def test_parse_docstring_keeps_a_continuation_line_that_contains_a_colon() -> None:
    doc = "Look up a day.\n\nArgs:\n    day: The day to look up.\n        Format: YYYY-MM-DD.\n"
    assert parse_docstring(doc) == (
        "Look up a day.",
        {"day": "The day to look up. Format: YYYY-MM-DD."},
    )


def test_parse_docstring_without_args() -> None:
    assert parse_docstring("Just a summary.") == ("Just a summary.", {})
    assert parse_docstring("") == ("", {})


def test_missing_type_hint_fails_at_decoration_time() -> None:
    with pytest.raises(TypeError) as raised:

        @tool
        def bad(a: int, b) -> None:  # type: ignore[no-untyped-def]
            """Bad."""

    assert str(raised.value) == "tool 'bad': parameter 'b' needs a type hint"


@pytest.mark.parametrize("kind", ["args", "kwargs"])
def test_var_args_fail_at_decoration_time(kind: str) -> None:
    def star(*args: int) -> None:
        """Star."""

    def double_star(**kwargs: int) -> None:
        """Double star."""

    fn = star if kind == "args" else double_star
    with pytest.raises(TypeError) as raised:
        tool(fn)
    assert str(raised.value) == (f"tool {fn.__name__!r}: *args and **kwargs are not supported")
